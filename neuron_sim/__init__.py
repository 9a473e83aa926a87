"""neuron-sim: simulate and verify HLO modules and the compiler passes that rewrite them."""

from neuron_sim.hlo import HloModule, HloParseError, parse_module, parse_module_file, print_module

__version__ = "0.1.0"

__all__ = ["HloModule", "HloParseError", "Topology", "parse_module", "parse_module_file",
           "print_module", "__version__"]


def __getattr__(name: str):
    # Topology lives in its own module; import it lazily so `import neuron_sim` stays light.
    if name == "Topology":
        from neuron_sim.topology import Topology
        return Topology
    raise AttributeError(name)
