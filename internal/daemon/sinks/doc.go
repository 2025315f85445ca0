// Package sinks posts messages to chat: Slack and Mattermost incoming webhooks and the Telegram
// Bot API, each rendering a message in its own markup, behind the Sink interface the outbox's
// Dispatcher delivers to. Errors say whether a retry can help (IsPermanent, RetryAfter).
//
// Webhook URLs and bot tokens are secrets: they are read from files or environment variables
// (ReadSecret), never from literals, and redacted from every error.
//
// One package with a file per sink rather than a subpackage per sink: the sinks share an HTTP
// poster that redacts secrets, mention breaking and truncation, which subpackages would have to
// export for their siblings only, and one test table covers the three sinks' payloads and secrets.
package sinks
