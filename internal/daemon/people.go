package daemon

import (
	"strings"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// peopleWait is how long a new drift waits for the audit event of the write that made it (the
// audit log is read every second; the webhook backend batches) before it is announced without.
const peopleWait = 10 * time.Second

// peopleWaits is the part that holds reports back for their people: when each field without a
// person was first seen, and each env's report held back. It owns its lock.
type peopleWaits struct {
	on  func(cluster string) bool // audit events come from cluster ("" for Argo CD's own)
	now func() time.Time
	// unnamed says a person found is not the one yet: a write argocd-server made, whose Argo CD
	// user its record, read a moment later, names (nil: every person found is).
	unnamed func(*drift.Actor) bool

	mu        sync.Mutex
	firstSeen map[string]time.Time     // fields without a person yet: when first seen
	held      map[string]*drift.Report // per env, the report held back waiting for people
}

func newPeopleWaits(on func(string) bool) *peopleWaits {
	return &peopleWaits{on: on, now: time.Now, firstSeen: map[string]time.Time{}, held: map[string]*drift.Report{}}
}

// check says whether rep is held back: a field written, or a Missing or Extra object seen, in
// the last peopleWait on a cluster whose audit events are read has no person yet. again are the
// objects to audit once more in a second, by when the event has usually arrived: those held, and
// those a controller rule excused on a manager's name alone (a person writing under a
// controller's name is then new drift). Past peopleWait a drift is announced as it is.
func (p *peopleWaits) check(rep *drift.Report) (hold bool, again []drift.Ref) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	present := map[string]bool{}
	seen := func(k string) time.Duration {
		present[k] = true
		if _, ok := p.firstSeen[k]; !ok {
			p.firstSeen[k] = now
		}
		return now.Sub(p.firstSeen[k])
	}
	for i := range rep.Objects {
		o := &rep.Objects[i]
		if !p.on(o.Cluster) {
			continue // nobody's audit events come from that cluster
		}
		// A Missing or Extra object without its person yet (or argocd-server's, its user not named yet).
		whole := o.Status == drift.Missing || o.Status == drift.Extra
		wait := whole && (o.Actor == nil || p.unnamed != nil && p.unnamed(o.Actor)) && seen(rep.Env+"|"+objectKey(o)+"|") < peopleWait
		for _, f := range o.Fields {
			// From when the daemon first saw the field without a person (not managedFields' time,
			// which a writer that keeps writing keeps fresh).
			if (f.Actor == nil || p.unnamed != nil && p.unnamed(f.Actor)) && seen(rep.Env+"|"+objectKey(o)+"|"+f.Path) < peopleWait {
				wait = true
			}
		}
		if wait {
			hold = true
			again = append(again, drift.RefOfObject(o))
		}
	}
	for _, u := range rep.Unverified {
		// Per value of the excused fields: a later write there is waited for anew, a status
		// write that moves only the resourceVersion is not. Audited again for peopleWait from
		// when first seen, without holding the report.
		k := rep.Env + "|excused|" + u.Cluster + "|" + u.Group + "|" + u.Kind + "|" + u.Namespace + "|" + u.Name + "|" + u.Fingerprint
		if seen(k) < peopleWait {
			again = append(again, u.Ref)
		}
	}
	for k := range p.firstSeen { // forget fields of this env that are gone
		if strings.HasPrefix(k, rep.Env+"|") && !present[k] {
			delete(p.firstSeen, k)
		}
	}
	return hold, again
}

// hold keeps rep as its env's report held back.
func (p *peopleWaits) hold(rep *drift.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held[rep.Env] = rep
}

// take returns env's report held back, if any, and forgets it.
func (p *peopleWaits) take(env string) *drift.Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	rep := p.held[env]
	delete(p.held, env)
	return rep
}

// awaitPeople holds the report back when audit events are configured and a field written in the
// last peopleWait has no person yet (peopleWaits.check); the objects it names are audited again
// in a second.
func (d *Daemon) awaitPeople(rep *drift.Report) bool {
	if d.people == nil {
		return false
	}
	hold, again := d.waits.check(rep)
	if len(again) > 0 {
		time.AfterFunc(time.Second, func() {
			for _, r := range again {
				d.touchRef(r)
			}
		})
	}
	return hold
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
