package ledger

import (
	"sort"
	"strings"
	"time"
)

// Filter keeps the records of env and model ("" matches all).
func Filter(records []Record, env, model string) []Record {
	var out []Record
	for _, r := range records {
		if (env == "" || r.Env == env) && (model == "" || r.Model == model) {
			out = append(out, r)
		}
	}
	return out
}

// Find returns the record with id (a unique prefix of at least 4 characters also matches).
func Find(records []Record, id string) (Record, bool) {
	var hit []Record
	for _, r := range records {
		if r.ID == id {
			return r, true
		}
		if len(id) >= 4 && strings.HasPrefix(r.ID, id) {
			hit = append(hit, r)
		}
	}
	if len(hit) == 1 {
		return hit[0], true
	}
	return Record{}, false
}

// Served is what served at a point in time.
type Served struct {
	Env string    `json:"env"`
	At  time.Time `json:"at"`
	// Revision is the manifest commit of the last record at or before At ("" when none).
	Revision string    `json:"revision,omitempty"`
	Models   []Serving `json:"models"`
}

// At replays the records of env in ledger order up to the last one committed at or before t (the
// state after that record) and returns what served then: added or changed versions with their
// last state; retired ones removed.
func At(records []Record, env string, t time.Time) Served {
	out := Served{Env: env, At: t}
	st := State{}
	last := -1
	for i, r := range records {
		if r.Env == env && !r.CommittedAt.After(t) {
			last = i
		}
	}
	for _, r := range records[:last+1] {
		if r.Env != env {
			continue
		}
		eff := r.Kind
		if eff == KindRollback {
			eff = r.Effect
		}
		if eff == KindRetired {
			delete(st, r.Key())
		} else {
			st[r.Key()] = Serving{Model: r.Model, Deployment: r.Deployment, Namespace: r.Namespace, Version: r.Version,
				WeightsURI: r.WeightsURI, WeightsRevision: r.WeightsRevision, Image: r.Image,
				SharePercent: r.SharePercent, Replicas: r.Replicas}
		}
		out.Revision = r.Revision
	}
	out.Models = st.Sorted()
	if out.Models == nil {
		out.Models = []Serving{}
	}
	return out
}

// SortByTime orders records by commit time, keeping ledger order for equal times.
func SortByTime(records []Record) {
	sort.SliceStable(records, func(i, j int) bool { return records[i].CommittedAt.Before(records[j].CommittedAt) })
}
