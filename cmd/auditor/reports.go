package main

import (
	"time"

	"github.com/llm-gitops/platform/internal/platform/check"
)

// The reports of the commands that push, as -o json and -o yaml print them: what was committed
// (or would be, with --dry-run) and where. Their text forms are the commands' own.

// ledgerWriteReport is what `ledger rebuild` and `ledger sync` did to an env's ledger.
type ledgerWriteReport struct {
	File     string `json:"file"`
	Records  int    `json:"records"`            // the ledger's records (rebuild) or those appended (sync)
	Commit   string `json:"commit,omitempty"`   // empty when the ledger was up to date
	NoChange bool   `json:"noChange,omitempty"` // the ledger was up to date
	DryRun   bool   `json:"dryRun,omitempty"`   // Commit was built, not pushed
}

// fireReport is what `schedule fire` did for one occurrence of a peak.
type fireReport struct {
	Phase       string    `json:"phase"`
	Peak        string    `json:"peak"`
	FireTime    time.Time `json:"fireTime"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	LeadSeconds float64   `json:"leadSeconds"`
	NoChange    bool      `json:"noChange,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	File        string    `json:"file,omitempty"`
	Line        int       `json:"line,omitempty"`
	From        int64     `json:"from"`
	To          int64     `json:"to"`
	Commit      string    `json:"commit,omitempty"`
	DryRun      bool      `json:"dryRun,omitempty"` // Commit was built, not pushed
	Attempts    int       `json:"attempts,omitempty"`
	Remote      string    `json:"remote"`
	Branch      string    `json:"branch"`
}

// promoteReport is what `promote` changed in the --to env and committed.
type promoteReport struct {
	From      string         `json:"from,omitempty"`
	To        string         `json:"to"`
	Old       string         `json:"old"`
	New       string         `json:"new"`
	Backwards bool           `json:"backwards,omitempty"`
	Changes   []check.Change `json:"changes"`
	NoChange  bool           `json:"noChange,omitempty"`
	// Violations are the rules the target env breaks at the new revision; Warnings the notes.
	Violations []check.Violation `json:"violations"`
	Warnings   []check.Violation `json:"warnings,omitempty"`
	// Forced is the reason given for promoting past Violations.
	Forced string `json:"forced,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Branch is where Commit was pushed: the branch itself, or a branch for review.
	Branch   string `json:"branch,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	// Ledger is the ledger commit recording the promotion, if any.
	Ledger *ledgerWriteReport `json:"ledger,omitempty"`
}
