package schedule

import (
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// PlannedChange is the edit a firing would commit.
type PlannedChange struct {
	File   string `json:"file"`
	Object string `json:"object"`
	Field  string `json:"field"`
	From   *int64 `json:"from,omitempty"`
	To     int64  `json:"to"`
	// Note is set when the firing would not commit (already at or above the target).
	Note string `json:"note,omitempty"`
}

// PlannedStage is one cold start stage of a firing's lead time, in seconds.
type PlannedStage struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Detail  string  `json:"detail"`
}

// PlannedLead is a firing's lead time broken down, in seconds.
type PlannedLead struct {
	TotalSeconds     float64        `json:"totalSeconds"`
	ArgoSyncSeconds  float64        `json:"argoSyncDelaySeconds"`
	ColdStartSeconds float64        `json:"coldStartSeconds"`
	ColdStartStages  []PlannedStage `json:"coldStartStages"`
	MarginSeconds    float64        `json:"marginSeconds"`
}

// PlannedFiring is a firing as `auditor schedule plan` reports it: times in the peak's time zone,
// the lead time broken down, and the change it would commit.
type PlannedFiring struct {
	Peak     string        `json:"peak"`
	TimeZone string        `json:"timeZone"`
	FireTime string        `json:"fireTime"`
	Start    string        `json:"start"`
	End      string        `json:"end"`
	Lead     PlannedLead   `json:"leadTime"`
	Change   PlannedChange `json:"change"`
}

// Describe is firing f with the change it would commit on snap: to the target file, or for a
// pinned env to its Application's kustomize patches, from the value the env runs now.
func (s *Schedule) Describe(f Firing, snap *gitrepo.Snapshot) PlannedFiring {
	p := f.Peak
	pf := PlannedFiring{
		Peak: p.Name, TimeZone: p.TimeZone,
		FireTime: f.FireTime.In(p.Location).Format(time.RFC3339),
		Start:    f.Start.In(p.Location).Format(time.RFC3339),
		End:      f.End.In(p.Location).Format(time.RFC3339),
		Lead: PlannedLead{
			TotalSeconds:     f.Lead.Total.Seconds(),
			ArgoSyncSeconds:  f.Lead.ArgoSyncDelay.Seconds(),
			ColdStartSeconds: f.Lead.ColdStart.Total.Seconds(),
			MarginSeconds:    f.Lead.Margin.Seconds(),
		},
		Change: PlannedChange{File: p.Target.Path, Object: p.Target.Kind + "/" + p.Target.Name, Field: p.Target.Field, To: p.Warm},
	}
	for _, st := range f.Lead.ColdStart.Stages {
		pf.Lead.ColdStartStages = append(pf.Lead.ColdStartStages, PlannedStage{st.Name, st.Duration.Seconds(), st.Detail})
	}
	st, err := s.siteOf(snap, p)
	if err != nil {
		pf.Change.Note = err.Error()
		return pf
	}
	pf.Change.File = st.file
	if v, err := st.current(snap, p.Target); err == nil {
		pf.Change.From = &v
		if v >= p.Warm {
			pf.Change.Note = "no commit: already at or above the target"
		}
	}
	return pf
}
