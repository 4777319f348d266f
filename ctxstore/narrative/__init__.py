"""Narrative Markdown under ``.ctx/narrative/`` (spec 002 §8): one module per job.

``markdown`` (templates, markers, parsing entries), ``snapshot`` (the files and their
snapshots in commits), ``entries`` (``ctx add note|task|decision``), ``ingest`` (hand
edits read back at commit) and ``summary`` (the session summary at compaction). This
package module imports nothing: import the module that owns a name.
"""
