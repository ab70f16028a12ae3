"""The LLM judge: the sampled judge that scores routed answers (``sampled.py``) and how wrong it is, measured
against users' scores and itself, with its scores corrected (``calibration.py``). Its settings are
``config/judge.py``."""
