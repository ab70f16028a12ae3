"""What routing saved: the estimate of every request sent to one model (``alternatives.py``), the report per team
and tier from the store (``report.py``) and its HTML page (``html.py``)."""
