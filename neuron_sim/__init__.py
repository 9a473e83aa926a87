"""neuron-sim: simulate and verify HLO modules and the compiler passes that rewrite them."""

__version__ = "0.1.0"

__all__ = ["HloModule", "HloParseError", "Topology", "parse_module", "parse_module_file",
           "print_module", "__version__"]

_LAZY = {"HloModule": "neuron_sim.hlo", "HloParseError": "neuron_sim.hlo",
         "parse_module": "neuron_sim.hlo", "parse_module_file": "neuron_sim.hlo",
         "print_module": "neuron_sim.hlo", "Topology": "neuron_sim.topology"}


def __getattr__(name: str):
    # The names are imported on first use, so that `import neuron_sim` (which every
    # `neuron_sim.*` import runs first) costs nothing: the command line installs its start-up
    # Ctrl-C handler before numpy loads.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'neuron_sim' has no attribute {name!r}")
