// Package report turns drift reports into chat notifications and delivers them without losing
// any: a Tracker finds new and resolved drift between consecutive reports, messages name the
// drift and the command that fixes it (or the patch that adopts it into Git), a Folder folds
// bursts into per-environment digests, and a Dispatcher per sink delivers from a durable
// on-disk Outbox with backoff, rate limiting and duplicate suppression.
//
// Secrets never leave the package in clear: values of a Secret's data and stringData (and its
// last-applied-configuration annotation) are masked before they reach a message, and webhook
// URLs and bot tokens are read from files or environment variables and redacted from errors.
package report
