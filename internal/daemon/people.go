package daemon

import (
	"slices"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/drift"
)

// peopleWait is how long a new drift waits for the audit event of the write that made it (the
// audit log is read every second; the webhook backend batches) before it is announced without.
const peopleWait = 10 * time.Second

// awaitPeople holds the report back when audit events are configured and a field written in the
// last peopleWait has no person yet: its objects are audited again in a second, by when the event
// has usually arrived. Past peopleWait the drift is announced as it is.
func (d *Daemon) awaitPeople(rep *drift.Report) bool {
	if d.people == nil {
		return false
	}
	now := time.Now()
	d.peopleMu.Lock()
	if d.firstSeen == nil {
		d.firstSeen, d.held = map[string]time.Time{}, map[string]*drift.Report{}
	}
	present := map[string]bool{}
	var wait []drift.Ref
	for i := range rep.Objects {
		o := &rep.Objects[i]
		if !d.peopleOn(o.Cluster) {
			continue // nobody's audit events come from that cluster
		}
		hold := false
		for _, f := range o.Fields {
			if f.Actor != nil {
				continue
			}
			// From when the daemon first saw the field without a person (not managedFields' time,
			// which a writer that keeps writing keeps fresh).
			k := rep.Env + "|" + objectKey(o) + "|" + f.Path
			present[k] = true
			if _, ok := d.firstSeen[k]; !ok {
				d.firstSeen[k] = now
			}
			hold = hold || now.Sub(d.firstSeen[k]) < peopleWait
		}
		if hold {
			wait = append(wait, drift.RefOfObject(o))
		}
	}
	// Objects a controller rule excused on a manager's name alone, written lately: audited again
	// once the event may be in (a person writing under a controller's name is then new drift),
	// for peopleWait from when the daemon first saw them, without holding the report.
	again := slices.Clone(wait)
	for _, u := range rep.Unverified {
		// Per value of the excused fields: a later write there is waited for anew, a status
		// write that moves only the resourceVersion is not.
		k := rep.Env + "|excused|" + u.Cluster + "|" + u.Group + "|" + u.Kind + "|" + u.Namespace + "|" + u.Name + "|" + u.Fingerprint
		present[k] = true
		if _, ok := d.firstSeen[k]; !ok {
			d.firstSeen[k] = now
		}
		if now.Sub(d.firstSeen[k]) < peopleWait {
			again = append(again, u.Ref)
		}
	}
	for k := range d.firstSeen { // forget fields of this env that are gone
		if strings.HasPrefix(k, rep.Env+"|") && !present[k] {
			delete(d.firstSeen, k)
		}
	}
	d.peopleMu.Unlock()
	if len(again) == 0 {
		return false
	}
	time.AfterFunc(time.Second, func() {
		for _, r := range again {
			d.touchRef(r)
		}
	})
	return len(wait) > 0
}

// vanished returns the drift of held (a report held back) that cur no longer has: whole objects,
// or the fields of an object cur still lists.
func vanished(held, cur *drift.Report) []drift.Object {
	if held == nil {
		return nil
	}
	now := map[string]map[string]bool{}
	for _, o := range cur.Objects {
		fs := map[string]bool{}
		for _, f := range o.Fields {
			fs[f.Path] = true
		}
		now[objectKey(&o)] = fs
	}
	var out []drift.Object
	for _, o := range held.Objects {
		fs, ok := now[objectKey(&o)]
		if !ok {
			out = append(out, o)
			continue
		}
		gone := o
		gone.Fields = nil
		for _, f := range o.Fields {
			if !fs[f.Path] {
				gone.Fields = append(gone.Fields, f)
			}
		}
		if len(gone.Fields) > 0 {
			out = append(out, gone)
		}
	}
	return out
}

// objectKey names an object of a report on its cluster.
func objectKey(o *drift.Object) string {
	return o.Cluster + "|" + o.Kind + "|" + o.Namespace + "|" + o.Name
}

// peopleOn says whether audit events come from cluster ("" for Argo CD's own): only there is a
// drift worth holding back for its person.
func (d *Daemon) peopleOn(cluster string) bool {
	if cluster == "" {
		return d.cfg.AuditEvents.enabled()
	}
	for _, c := range d.cfg.Clusters {
		if c.Name == cluster {
			return c.AuditLog != ""
		}
	}
	return false
}
