"""XLA reference passes: baselines and clean-ups the seed passes rely on (e.g. ``dce``)."""
