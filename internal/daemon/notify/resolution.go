package notify

import (
	"time"

	"github.com/llm-gitops/platform/internal/daemon/message"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// Resolution is how a drift ended.
type Resolution struct {
	// By is the writer that owns the field now (argocd-controller for a sync or selfHeal), or,
	// for a Missing object back again, the writer that made it.
	By drift.Writer `json:"by"`
	// After is how long the drift stood, from the hand edit's time to By's (both to the second,
	// as managedFields keep them); Measured says whether both were known.
	After    time.Duration `json:"after,omitempty"`
	Measured bool          `json:"measured,omitempty"`
	// Verb says how it ended, for people: "reverted by" (another writer set Git's value back),
	// "set back by" (the writer of the drift did).
	Verb string `json:"verb,omitempty"`
	// How is the episode's end (episode.Reverted, Adopted, Overwritten, Deleted, Dropped); empty
	// when no episode was kept (Verb and By then say it).
	How string `json:"how,omitempty"`
	// Actor is the person behind By, when the audit events name one.
	Actor *drift.Actor `json:"actor,omitempty"`
	// Commit is the commit that adopted the live value into Git.
	Commit *episode.Commit `json:"commit,omitempty"`
}

// ResolutionOf says how an ended episode ended, for a resolution notice.
func ResolutionOf(e episode.Episode) *Resolution {
	if e.End == nil {
		return nil
	}
	r := &Resolution{How: e.End.How, Actor: e.End.Actor, Commit: e.End.Commit, After: e.Duration(e.End.At), Measured: true, Verb: "reverted by"}
	if e.End.By != nil {
		r.By = *e.End.By
		if r.By.Manager == e.Writer.Manager && e.End.How == episode.Reverted {
			r.Verb = "set back by"
		}
	}
	return r
}

// Summary says how the drift ended and how long it stood, for people ("" when nothing is known):
// "reverted by argocd-controller after 4m0s", "adopted into Git by commit 1a2b3c4 (prod: 3
// replicas) after 1h0m0s", "overwritten by kubectl-scale (bob) after 30s", "object deleted after 2m0s".
func (r *Resolution) Summary() string {
	who := r.By.Manager
	if r.Actor != nil && r.Actor.User != "" {
		if who != "" {
			who += " (" + r.Actor.User + ")"
		} else {
			who = r.Actor.User
		}
	}
	var s string
	switch r.How {
	case episode.Adopted:
		s = "adopted into Git"
		if c := r.Commit; c != nil {
			s += " by commit " + gitrepo.Short(c.SHA)
			if c.Subject != "" {
				s += " (" + message.Truncate(c.Subject, 80) + ")"
			}
		}
	case episode.Overwritten:
		s = "overwritten by " + who + ", a new drift"
	case episode.Deleted:
		s = "object deleted"
	case episode.Dropped:
		s = "no longer reported"
	default:
		if who == "" {
			return ""
		}
		s = r.Verb + " " + who
	}
	if took := r.Took(); took != "" {
		s += " " + took
	}
	return s
}

// Took says how long the drift stood, for people: "after 12s", "within 1s", or "".
func (r *Resolution) Took() string {
	switch {
	case !r.Measured:
		return ""
	case r.After < time.Second:
		return "within 1s"
	default:
		return "after " + r.After.Round(time.Second).String()
	}
}

// Resolve says how it ended, given the live object as it is now (nil: deleted) and the revision
// the cluster is now compared with: who owns the item's field now, or who made a Missing object
// again; After is measured from the hand edit's time when the item knows it. Nil when nobody can
// be named, or when the revision moved (Git changed, so the drift may have been adopted: the
// value's owner says nothing about that).
func Resolve(it Item, live *unstructured.Unstructured, revision string) *Resolution {
	if live == nil || revision != it.Revision {
		return nil
	}
	var by *drift.Writer
	f := it.Field()
	if f != nil {
		by = drift.OwnerOf(live, f.FieldPath)
	} else if it.Object.Status == drift.Missing {
		by = drift.CreatorOf(live)
	}
	if by == nil || by.Manager == "" {
		return nil
	}
	r := &Resolution{By: *by, Verb: "reverted by"}
	if f != nil && f.Manager == by.Manager {
		r.Verb = "set back by"
	}
	if f != nil && f.Time != "" && by.Time != "" {
		from, err1 := time.Parse(time.RFC3339, f.Time)
		to, err2 := time.Parse(time.RFC3339, by.Time)
		if err1 == nil && err2 == nil && !to.Before(from) {
			r.After, r.Measured = to.Sub(from), true
		}
	}
	return r
}
