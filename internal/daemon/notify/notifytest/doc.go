// Package notifytest holds what the tests of notify, outbox, sinks and adopt share: drift
// fixtures, a real HTTP chat API that records what it accepted (Receiver), secret files and
// golden files. Only tests import it.
package notifytest
