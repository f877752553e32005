"""Cost models: the paper's roofline of HBM traffic and serving time (``roofline``), with
hardware and model specifications as data (``specs.json``)."""
