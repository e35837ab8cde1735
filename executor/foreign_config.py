"""The top-level settings of other applications' ``config.yaml``: toolexec accepts them and ignores them.

Read from each project's own ``Config`` struct (every serde field it deserializes, across the
whole history of ``src/config/``, so older files load too) and ``config.example.yaml``:

* Loki: Dark-Alex-17/loki at e98bf56a (``src/config/mod.rs``);
* Coyote: Dark-Alex-17/coyote at 5f23e240 (``src/config/mod.rs``, ``src/config/app_config.rs``);
* AIChat: sigoden/aichat at 82976d34 (``src/config/mod.rs``), whose config llm-functions users run.

The settings toolexec itself has (``visible_tools``, ``enabled_tools``, ``mapping_tools``) are left
out: they are read, not ignored. Data only: :mod:`toolexec.config` imports it when a config has a
setting that is not toolexec's own.
"""

from __future__ import annotations

# Each setting and the applications whose config.yaml has (or had) it.
OWNERS: dict[str, str] = {
    "agent_prelude": "Loki Coyote AIChat",
    "agent_session": "Loki Coyote",
    "agents": "AIChat",
    "api_key": "AIChat",
    "append_command_to_history_file": "AIChat",
    "auto_continue": "Coyote",
    "auto_copy": "AIChat",
    "bot_prelude": "AIChat",
    "bots": "AIChat",
    "buffer_editor": "AIChat",
    "clients": "Loki Coyote AIChat",
    "cmd_prelude": "Loki Coyote AIChat",
    "compress_threshold": "Loki Coyote AIChat",
    "compression_keep_last": "Coyote",
    "compression_threshold": "Loki Coyote",
    "connect_timeout": "AIChat",
    "continuation_prompt": "Coyote",
    "conversation_first": "AIChat",
    "ctrlc_exit": "AIChat",
    "dangerously_functions": "AIChat",
    "dangerously_functions_filter": "AIChat",
    "document_loaders": "Loki Coyote AIChat",
    "dry_run": "Loki Coyote AIChat",
    "editor": "Loki Coyote AIChat",
    "embedding_model": "AIChat",
    "enabled_macros": "Coyote",
    "enabled_mcp_servers": "Loki Coyote",
    "enabled_skills": "Coyote",
    "function_calling": "Loki Coyote AIChat",
    "function_calling_support": "Loki Coyote",
    "highlight": "Loki Coyote AIChat",
    "inject_skill_instructions": "Coyote",
    "inject_todo_instructions": "Coyote",
    "keybindings": "Loki Coyote AIChat",
    "left_prompt": "Loki Coyote AIChat",
    "light_theme": "Loki Coyote AIChat",
    "mapping_mcp_servers": "Loki Coyote",
    "max_auto_continues": "Coyote",
    "max_tool_result_chars": "Coyote",
    "mcp_server_support": "Loki Coyote",
    "mcp_servers": "Loki Coyote",
    "memory": "Coyote",
    "memory_cap_with_tools": "Coyote",
    "memory_cap_without_tools": "Coyote",
    "model": "Loki Coyote AIChat",
    "no_workspace_macros": "Coyote",
    "no_workspace_mcp": "Coyote",
    "organization_id": "AIChat",
    "password_file": "Loki Coyote",
    "prelude": "AIChat",
    "proxy": "AIChat",
    "rag_chunk_overlap": "Loki Coyote AIChat",
    "rag_chunk_size": "Loki Coyote AIChat",
    "rag_document_loaders": "AIChat",
    "rag_embedding_model": "Loki Coyote AIChat",
    "rag_extractor_model": "Coyote",
    "rag_extractor_prompt": "Coyote",
    "rag_graph_hops": "Coyote",
    "rag_min_score_fulltext_search": "AIChat",
    "rag_min_score_keyword_search": "AIChat",
    "rag_min_score_rerank": "AIChat",
    "rag_min_score_text": "AIChat",
    "rag_min_score_vector": "AIChat",
    "rag_min_score_vector_search": "AIChat",
    "rag_minimum_score": "AIChat",
    "rag_rerank_model": "AIChat",
    "rag_reranker_model": "Loki Coyote AIChat",
    "rag_template": "Loki Coyote AIChat",
    "rag_top_k": "Loki Coyote AIChat",
    "raw_markdown": "Coyote",
    "reasoning_effort": "Coyote",
    "repl_prelude": "Loki Coyote AIChat",
    "right_prompt": "Loki Coyote AIChat",
    "save": "Loki Coyote AIChat",
    "save_session": "Loki Coyote AIChat",
    "save_shell_history": "Loki Coyote AIChat",
    "secrets_provider": "Coyote",
    "serve_addr": "Loki Coyote AIChat",
    "skill_instructions": "Coyote",
    "skills_enabled": "Coyote",
    "stream": "Loki Coyote AIChat",
    "summarization_prompt": "Loki Coyote",
    "summarize_prompt": "Loki Coyote AIChat",
    "summary_context_prompt": "Loki Coyote",
    "summary_prompt": "Loki Coyote AIChat",
    "sync_models_url": "Loki Coyote AIChat",
    "temperature": "Loki Coyote AIChat",
    "theme": "Loki Coyote AIChat",
    "top_p": "Loki Coyote AIChat",
    "use_agent": "AIChat",
    "use_mcp_servers": "Loki Coyote",
    "use_tools": "Loki Coyote AIChat",
    "user_agent": "Loki Coyote AIChat",
    "vault_password_file": "Loki Coyote",
    "vi_keybindings": "AIChat",
    "visible_skills": "Coyote",
    "workspace_instructions": "Coyote",
    "workspace_instructions_files": "Coyote",
    "wrap": "Loki Coyote AIChat",
    "wrap_code": "Loki Coyote AIChat",
}
APPLICATIONS = ("Loki", "Coyote", "AIChat")
# The settings of each application.
SETTINGS: dict[str, frozenset[str]] = {
    name: frozenset(key for key, owners in OWNERS.items() if name in owners.split()) for name in APPLICATIONS
}
