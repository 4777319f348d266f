"""The command table of ``ctx``: each command's module, attribute and one-line help.

Apart from the package and without click: ``ctx --help`` lists the commands from here
without importing a command module, and the root group (``cli.root``) and the help renderer
(``cli._help``) read it without importing the package that loads them.
"""

from __future__ import annotations

__all__ = ["COMMANDS", "ADD_COMMANDS"]

# name -> (module, attribute, one-line help). Help text lives here too so that
# `ctx --help` does not import every command module.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("ctxstore.cli.init", "init_command", "Create a .ctx/ store here."),
    "add": ("ctxstore.cli.nodes", "add_group",
            "Add a knowledge node (or: ctx add cargo|command ...)."),
    "show": ("ctxstore.cli.nodes", "show_command", "Show a node."),
    "update": ("ctxstore.cli.nodes", "update_command", "Write a new version of a node."),
    "delete": ("ctxstore.cli.nodes", "delete_command", "Delete a node (and its edges)."),
    "list": ("ctxstore.cli.nodes", "list_command", "List nodes."),
    "link": ("ctxstore.cli.edges", "link_command", "Link two nodes."),
    "unlink": ("ctxstore.cli.edges", "unlink_command", "Remove edges between two nodes."),
    "edges": ("ctxstore.cli.edges", "edges_command", "Show a node's edges."),
    "tag": ("ctxstore.cli.tags", "tag_command", "Add tags to a node."),
    "untag": ("ctxstore.cli.tags", "untag_command", "Remove tags from a node."),
    "tags": ("ctxstore.cli.tags", "tags_command", "List tags with counts."),
    "search": ("ctxstore.cli.search", "search_command", "Full-text search."),
    "query": ("ctxstore.cli.search", "query_command", "Query nodes with the query language."),
    "trace": ("ctxstore.cli.search", "trace_command", "Show provenance (what a node derives from)."),
    "related": ("ctxstore.cli.search", "related_command", "Nodes within N edges of a node."),
    "summarize": ("ctxstore.cli.nodes", "summarize_command", "Summarize nodes into a new one."),
    "supersede": ("ctxstore.cli.nodes", "supersede_command", "Mark a node superseded by another."),
    "view": ("ctxstore.cli.views", "view_group", "Manage saved views."),
    "compose": ("ctxstore.cli.views", "compose_command", "Compose context within a token budget."),
    "status": ("ctxstore.cli.status", "status_command", "Show what the store holds."),
    "export": ("ctxstore.cli.exchange", "export_command", "Export nodes, edges and views as JSON."),
    "import": ("ctxstore.cli.exchange", "import_command", "Import a JSON export."),
    "ingest": ("ctxstore.cli.exchange", "ingest_command", "Ingest a file as a source node."),
    "rebuild": ("ctxstore.cli.rebuild", "rebuild_command", "Rebuild the derived index."),
    "upgrade": ("ctxstore.cli.upgrade", "upgrade_command",
                "Bring an older store's layout up to date (fold received staged work)."),
    "commit": ("ctxstore.cli.commit", "commit_command", "Fold staged work into a commit."),
    "stage": ("ctxstore.cli.stage", "stage_group", "Manage the staging session."),
    "log": ("ctxstore.cli.log", "log_command", "Show the commit history."),
    "gc": ("ctxstore.cli.gc", "gc_command", "Delete unreachable objects."),
    "purge": ("ctxstore.cli.purge", "purge_command",
              "Remove a node's or an object's content from the ctx history."),
    "debug": ("ctxstore.cli.debug", "debug_group", "Inspect objects, refs and integrity."),
    "diagnostics": ("ctxstore.cli.build", "diagnostics_command",
                    "List the latest diagnostics of stored commands."),
    "merge-ref": ("ctxstore.cli.merge_ref", "merge_ref_command",
                  "Git merge driver for ctx pointer files."),
    "hook": ("ctxstore.cli.hook", "hook_group", "Claude Code hook entry points (JSON in, JSON out)."),
    "install": ("ctxstore.cli.install", "install_command",
                "Install the Claude Code skill and hooks (or a plugin)."),
    "uninstall": ("ctxstore.cli.install", "uninstall_command",
                  "Remove exactly what `ctx install` added."),
    "claude-md": ("ctxstore.cli.claude_md", "claude_md_command",
                  "Write the ranked project-memory section of CLAUDE.md."),
    "agents-md": ("ctxstore.cli.claude_md", "agents_md_command",
                  "Write the ranked project-memory section of AGENTS.md."),
    "help": ("ctxstore.cli.root", "help_command", "Show help for ctx or a command."),
    "mcp": ("ctxstore.cli.mcp", "mcp_command", "Serve the store to MCP clients over stdio."),
    "lifecycle": ("ctxstore.cli.lifecycle", "lifecycle_command",
                  "Decay, archive, restore and prune memories."),
    "consolidate": ("ctxstore.cli.lifecycle", "consolidate_command",
                    "Merge similar memories (proposals, apply, undo)."),
    "recall": ("ctxstore.cli.recall", "recall_command",
               "Recall memories from this project and ~/.ctx, labelled by store."),
    "trust": ("ctxstore.cli.trust", "trust_command",
              "Consent to committed settings that write outside .ctx/ or weaken secret scanning."),
    "llm": ("ctxstore.cli.llm", "llm_command", "Send a prompt pack to an LLM server."),
    "memory": ("ctxstore.cli.memory", "memory_group",
               "Transcript memory: backfill, search, stats, topics, promote."),
    "doctor": ("ctxstore.cli.doctor", "doctor_command",
               "Check the setup (hooks, ctx on their PATH, store, merge driver, index); print fixes."),
    "index": ("ctxstore.cli.code", "index_command",
              "Index the work tree's files, symbols and relations."),
    "relate": ("ctxstore.cli.code", "relate_command",
               "Relate nodes, files and symbols with a labelled edge."),
    "pack": ("ctxstore.cli.pack", "pack_command",
             "Build a prompt pack of the files and memory relevant to a task."),
    "ui": ("ctxstore.cli.ui", "ui_command",
           "Browse the memory in a local web page (read-only), or export it as files."),
}

# `ctx add WHAT ...` forms that are commands of their own: name -> (module, attribute, help).
# Any other first word is the node form of `ctx add` (note, task, decision, --type TYPE).
ADD_COMMANDS: dict[str, tuple[str, str, str]] = {
    "file": ("ctxstore.cli.code", "add_file_command",
             "Snapshot files (and, with --extract-semantics, their symbols)."),
    "rust": ("ctxstore.cli.code", "add_rust_command",
             "Snapshot Rust files with their symbols and relations."),
    "cargo": ("ctxstore.cli.build", "add_cargo_command", "Snapshot the Cargo workspace."),
    "command": ("ctxstore.cli.build", "add_command_command",
                "Store a command's output and its diagnostics."),
}
