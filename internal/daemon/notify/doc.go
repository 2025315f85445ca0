// Package notify turns drift reports into chat messages: a Tracker finds the drift that
// appeared and the drift that went away between consecutive reports of an env, messages name
// the drift and the command that fixes it (or the patch that adopts it into Git, see package
// adopt), a Folder folds bursts into per-env digests, and a Notifier wires them together and
// enqueues each message into every sink's outbox (package outbox delivers them).
//
// Secrets never leave the package in clear: values of a Secret's data and stringData (and its
// last-applied-configuration annotation) are masked (MaskSecrets) before they reach an Item or a
// message.
package notify
