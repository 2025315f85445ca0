package episode

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Observe records one env's report: drift not open yet opens an episode, open episodes the
// report no longer has end (how is read from the live object and the revision), and an open
// episode whose live value or writer changed ends as overwritten by a new one. It returns the
// episodes opened and ended, oldest identity first.
func (b *Book) Observe(obs Observation) (opened, ended []Episode) {
	rep := obs.Report
	if rep == nil {
		return nil, nil
	}
	now := obs.Now
	if now.IsZero() {
		now = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	unknown := map[string]bool{} // objects the report could not compare: their episodes wait
	for _, o := range rep.Objects {
		if obs.Mask != nil {
			o = obs.Mask(o)
		}
		if o.Status == drift.Unknown {
			unknown[Identity(rep.Env, o.Cluster, o.APIVersion, o.Kind, o.Namespace, o.Name, "")] = true
			continue
		}
		for _, e := range candidates(rep, o, now) {
			id := e.identity()
			seen[id] = true
			cur, ok := b.open[id]
			switch {
			case ok && sameDrift(cur, &e):
				if cur.Actor == nil && e.Actor != nil { // the person's audit event came later
					cur.Actor = e.Actor
					cur.Start = e.Start
					b.dirty = true
				}
				if cur.Writer.Manager == "" && e.Writer.Manager != "" { // a watch named the writer later
					cur.Writer = e.Writer
					b.dirty = true
				}
				continue
			case ok:
				e.ID = b.newID(id, e.Start)
				cur.End = &End{At: e.Start, How: Overwritten, By: &e.Writer, Actor: e.Actor, Revision: rep.Revision, Next: e.ID}
				if cur.End.At.Before(cur.Start) {
					cur.End.At = now
				}
				ended = append(ended, b.close(id))
			default:
				e.ID = b.newID(id, e.Start)
			}
			ep := e
			if obs.Live != nil && ep.Status != drift.Missing {
				if live, ok := obs.Live(ep.Cluster, ep.APIVersion, ep.Kind, ep.Namespace, ep.Name); ok {
					ep.UID = string(live.GetUID())
				}
			}
			b.open[id] = &ep
			opened = append(opened, ep)
		}
	}
	for id, cur := range b.open {
		if cur.Env != rep.Env || seen[id] || unknown[Identity(cur.Env, cur.Cluster, cur.APIVersion, cur.Kind, cur.Namespace, cur.Name, "")] ||
			obs.Speaks != nil && !obs.Speaks(cur.Cluster) {
			continue
		}
		cur.End = howEnded(cur, obs, now)
		ended = append(ended, b.close(id))
	}
	if len(opened)+len(ended) > 0 {
		b.dirty = true
	}
	b.trim(now)
	sort.Slice(opened, func(i, j int) bool { return opened[i].ID < opened[j].ID })
	sort.Slice(ended, func(i, j int) bool { return ended[i].ID < ended[j].ID })
	return opened, ended
}

// candidates are the episodes a report's object would open: one per drifted field, or one for
// the whole object.
func candidates(rep *drift.Report, o drift.Object, now time.Time) []Episode {
	base := Episode{Env: rep.Env, APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
		Cluster: o.Cluster, Status: o.Status, Revision: rep.Revision}
	if o.Status != drift.Modified || len(o.Fields) == 0 {
		e := base
		if o.Creator != nil {
			e.Writer = *o.Creator
		}
		e.Actor = o.Actor // who created an Extra object, or deleted a Missing one
		e.Start = startOf(e.Writer, e.Actor, now)
		return []Episode{e}
	}
	out := make([]Episode, 0, len(o.Fields))
	for _, f := range o.Fields {
		e := base
		e.Path, e.FieldPath, e.Change = f.Path, f.FieldPath, f.Change
		e.Git, e.Live = f.Desired, f.Live
		e.Writer, e.Actor = f.Writer, f.Actor
		e.Start = startOf(f.Writer, f.Actor, now)
		out = append(out, e)
	}
	return out
}

// startOf is when a drift began: the audit event's time, else managedFields', else now.
func startOf(w drift.Writer, a *drift.Actor, now time.Time) time.Time {
	if a != nil {
		if t, err := time.Parse(time.RFC3339Nano, a.Time); err == nil {
			return t.UTC()
		}
	}
	if t, err := time.Parse(time.RFC3339, w.Time); err == nil && !t.After(now) {
		return t.UTC()
	}
	return now.UTC()
}

// sameDrift reports whether a report's drift is the open episode still: same live value, same
// writer. The desired value may move with Git (a new revision) without a new episode.
func sameDrift(open, now *Episode) bool {
	sameWriter := open.Writer.Manager == "" || open.Writer.Manager == now.Writer.Manager &&
		open.Writer.Subresource == now.Writer.Subresource
	return open.Status == now.Status && sameWriter && equalJSON(open.Live, now.Live)
}

// equalJSON compares two values as JSON would encode them (a value read back from the state
// file has float64 where the audit had int64).
func equalJSON(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// howEnded reads how an episode the report no longer has ended.
//
// A field is reverted when its live value is no longer the one the hand edit left (who set it
// is the field's owner now); adopted when Git moved and the live value is still the hand edit's
// (the commit that put it into Git is named); dropped when neither Git nor the value moved (an
// ignore rule, a controller rule, a new engine took it out of the report). An object whose UID
// changed was deleted (and made again).
func howEnded(e *Episode, obs Observation, now time.Time) *End {
	end := &End{At: now, How: Dropped, Revision: obs.Report.Revision}
	moved := obs.Report.Revision != e.Revision
	var live *unstructured.Unstructured
	found := false
	if obs.Live != nil {
		live, found = obs.Live(e.Cluster, e.APIVersion, e.Kind, e.Namespace, e.Name)
	}
	if found && e.UID != "" && string(live.GetUID()) != e.UID {
		end.How = Deleted // and made again since
		return end
	}
	switch {
	case obs.Live == nil:
	case e.Status == drift.Extra:
		if !found {
			end.How = Deleted
		} else if moved {
			adopted(e, obs, end, now) // Git declares it now
		}
	case e.Status == drift.Missing:
		if found {
			end.How = Reverted
			end.By = drift.CreatorOf(live)
		} else if moved {
			adopted(e, obs, end, now) // Git no longer declares it
		}
	case !found:
		end.How = Deleted
	default:
		v, has := drift.ValueAt(live.Object, e.FieldPath)
		kept := has && equalJSON(v, e.Live)
		if e.Change == drift.Removed {
			kept = !has
		}
		switch {
		case kept && moved:
			adopted(e, obs, end, now)
		case kept: // nothing moved: the drift left the report for another reason
		default:
			end.How = Reverted
			end.By = drift.OwnerOf(live, e.FieldPath)
			// the writer's own time when managedFields has it: the sync, not the audit, ended it
			if end.By != nil {
				if t, err := time.Parse(time.RFC3339, end.By.Time); err == nil && !t.Before(e.Start) && !t.After(now) {
					end.At = t.UTC()
				}
			}
		}
	}
	return end
}

// adopted ends e as adopted into Git, naming the commit, at the commit's time when it is known
// and falls inside the episode; as dropped when Git no longer declares the field.
func adopted(e *Episode, obs Observation, end *End, now time.Time) {
	end.How = Adopted
	end.Commit = &Commit{SHA: end.Revision}
	if obs.Adopter == nil {
		return
	}
	c, ok := obs.Adopter(*e, end.Revision)
	switch {
	case !ok:
		end.How, end.Commit = Dropped, nil
	case c != nil:
		end.Commit = c
		if !c.Date.IsZero() && c.Date.After(e.Start) && c.Date.Before(now) {
			end.At = c.Date.UTC()
		}
	}
}

// close moves the open episode id to the ended ones and returns it.
func (b *Book) close(id string) Episode {
	e := *b.open[id]
	delete(b.open, id)
	b.ended = append(b.ended, e)
	return e
}

// newID returns a unique episode ID for a drift identity starting at start.
func (b *Book) newID(identity string, start time.Time) string {
	b.seq++
	return fmt.Sprintf("%s@%s#%d", identity, start.UTC().Format(time.RFC3339), b.seq)
}

// trim drops ended episodes past the retention.
func (b *Book) trim(now time.Time) {
	cut := 0
	for cut < len(b.ended) && (len(b.ended)-cut > b.keep || now.Sub(b.ended[cut].End.At) > b.maxAge) {
		cut++
	}
	if cut > 0 {
		b.ended = slices.Clone(b.ended[cut:])
	}
}
