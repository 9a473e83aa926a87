"""One MPI rank under the dispatch setting its environment names (a test helper).

    mpiexec -n 1 -env NPY_DISABLE_CPU_FEATURES "X86_V4" python checked_rank.py JOBS.json : ...

Before anything runs, the rank checks that numpy really turned off every dispatch target that
``NPY_DISABLE_CPU_FEATURES`` names (exit 97 otherwise: a setting that was not honoured would make
the mixed-dispatch test vacuous), prints which it runs under, then runs ``run_modules.py``.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from neuron_sim.numerics.dispatch import require_honoured  # noqa: E402

wanted = os.environ.get("NPY_DISABLE_CPU_FEATURES", "").split()
require_honoured(wanted)
from mpi4py import MPI  # noqa: E402

print(f"rank {MPI.COMM_WORLD.Get_rank()} disabled: {' '.join(wanted) or '-'}", flush=True)
sys.argv = [str(Path(__file__).parent / "run_modules.py"), *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")
