"""The training set: which of a window's logged rows train and why the rest do not (``window.py``). Retrain
reads its rows through it, and the savings report its scores, so it sits below both."""
