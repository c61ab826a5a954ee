"""Files Bandpass ships into a verifier's container (engine/run/observer.py): never imported here.

``verify.sh`` is sourced by the verifier's shell; ``pytest_observer.py`` is a pytest plugin loaded by the
pytest the task's verifier runs, whatever its version, under the name ``bp_observer_<nonce>``. Both run
with the image's own interpreters (any bash >= 4, any Python 3 with pytest >= 3.8), so they keep to
what those have.
"""
