#!/usr/bin/python3
"""many_records.py FILE: write a dump of 200,000 one-float records."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import numpy as np  # noqa: E402
import pldump  # noqa: E402

pldump.write(sys.argv[1], {f"a/{i}": np.array([i], np.float32) for i in range(200000)})
