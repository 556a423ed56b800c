"""OpenClaw: plugin hooks (``api.on(hook, handler)``), no command hooks; aimem generates a plugin.

OpenClaw's ``docs/plugins/hooks/reference.md`` lists the typed hook catalog; a native
plugin is a folder with ``package.json`` (``"openclaw": {"extensions": ["./index.ts"]}``),
``openclaw.plugin.json`` and the entry module. aimem's plugin
(``aimem_cli.installers.extension``) pipes the same Claude-shaped payload as for Pi
(``aimem_common.clients.pi``) into ``aimem hook --agent openclaw --event <hook>``.

In 2026.9.6 ``session_start`` and ``session_end`` come from the gateway only (a session's first
turn, a reset, the gateway stopping: ``active-sessions-shutdown-tracker``); one-shot runs
(``openclaw agent exec``, ``agent --local``) fire only the tool hooks. Their context is
``{sessionId, sessionKey, agentId}``: the session id is ``sessionId`` (``sessionKey``, e.g.
``agent:main:main``, names a conversation that outlives many sessions) and the cwd is the
hook context's ``workspaceDir`` or else the agent's workspace. A plugin OpenClaw did not bundle
gets ``before_prompt_build`` and ``agent_end`` only with
``plugins.entries.<id>.hooks.allowConversationAccess`` (``aimem_cli.installers.openclaw``).
"""

from __future__ import annotations

from aimem_common.clients.base import PLAIN_TEXT, Client, K, event_table

EVENTS = event_table({  # the hook catalog of OpenClaw 2026.9.6
    K.SESSION_START: "session_start", K.USER_PROMPT: "before_prompt_build",
    K.PRE_TOOL_USE: "before_tool_call", K.POST_TOOL_USE: "after_tool_call",
    K.PRE_COMPACT: "before_compaction", K.POST_COMPACTION: "after_compaction",
    K.STOP: "agent_end", K.SESSION_END: "session_end",
    K.OTHER: "before_model_resolve agent_turn_prepare before_agent_run before_agent_reply before_agent_finalize"
             " heartbeat_prompt_contribution model_call_started model_call_ended llm_input llm_output"
             " resolve_exec_env tool_result_persist before_message_write inbound_claim channel_pairing_requested"
             " message_received message_sending reply_payload_sending message_sent before_dispatch reply_dispatch"
             " before_reset gateway_start gateway_stop cron_reconciled cron_changed before_install"
             " skill_proposal_evaluate skill_proposal_changed skill_changed"})

SUBSCRIBED = ("session_start", "before_prompt_build", "before_tool_call", "after_tool_call", "agent_end",
              "before_compaction", "after_compaction", "session_end")

CLIENT = Client(name="openclaw", events=EVENTS, end_event="session_end", session_start_output=PLAIN_TEXT)
