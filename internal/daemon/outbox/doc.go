// Package outbox delivers messages without losing any: an Outbox is a durable, bounded on-disk
// queue per sink that also remembers which drift was announced and how (shared between
// replicas through a RecordStore), and a Dispatcher sends its messages to one sink, at least
// once, with backoff, rate limiting and duplicate suppression.
package outbox
