package ledger

// RollbackSummary is a rollback as `auditor rollback -o json` prints it: the revert commit and
// the ledger records it added, and the error that left the ledger behind, if any.
type RollbackSummary struct {
	Revert   string   `json:"revert,omitempty"`
	NoChange bool     `json:"noChange,omitempty"`
	DryRun   bool     `json:"dryRun,omitempty"` // the revert and records were built, not pushed
	Records  []Record `json:"records"`
	Error    string   `json:"error,omitempty"`
}

// Records are the ledger records the rollback appended, over every env.
func (r RollbackResult) Records() []Record {
	var records []Record
	for _, s := range r.Synced {
		records = append(records, s.Records...)
	}
	return records
}

// Summary is r with err, the error of the ledger update after the revert was pushed.
func (r RollbackResult) Summary(err error) RollbackSummary {
	out := RollbackSummary{Revert: r.Revert.Commit, NoChange: r.Revert.NoChange, DryRun: r.Revert.DryRun, Records: r.Records()}
	if out.Records == nil {
		out.Records = []Record{}
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}
