"""Suite-wide test settings.

Hypothesis: no per-example deadline and no too-slow health check. The properties assert values,
never speed (speed lives in benchmarks/), and on a loaded 2-core CI machine an example can take
seconds, which made deadline errors fail tests that were correct.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("iclr", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("iclr")
