package adopt

import (
	"fmt"
	"path"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// candidate is one change of an Application's options, or of a value file they read, that may
// make a drifted field its live value.
type candidate struct {
	key   string // the value or option changed: "replicas", "images: api"
	where string // where it is written
	apply func(t *tree) (*tree, error)
	// part marks a value that makes only part of the field (an image's tag): tried when no
	// value that makes all of it passes.
	part bool
}

// optionSource is what renders objects of an Application with options adopt writes into.
type optionSource interface {
	render(t *tree) (*render.Result, error)
	candidates(t *tree, o drift.Object, f drift.Field) ([]candidate, error)
}

// maxCandidates bounds the renders tried for one field.
const maxCandidates = 24

// byOptions says whether o's Application renders it with options adopt may write into: a Helm
// chart of this repository, the Application's kustomize options, several sources.
func byOptions(o drift.Object) bool {
	s := o.Source
	return strings.HasPrefix(s, "Helm chart ") || strings.HasPrefix(s, "sources of ") ||
		strings.Contains(s, " with ") && strings.HasSuffix(s, "'s kustomize options")
}

// adoptOptions adopts the drifted fields of objs, objects of one Application, into what that
// Application's options set, in t: the field count adopted and notes on the others. why is what
// is said of a field nothing is written for.
func adoptOptions(t *tree, objs []drift.Object, why string) (int, []string) {
	m, reason, err := findManifest(t, objs[0])
	if err != nil {
		reason = err.Error()
	}
	if reason != "" {
		return 0, objectNotes(objs, why+"; "+reason)
	}
	app, _, err := m.app(t)
	if err != nil {
		return 0, objectNotes(objs, why+"; "+err.Error())
	}
	if r := sharedManifest(t, m.file, app.Name); r != "" {
		return 0, objectNotes(objs, why+"; "+r)
	}
	for _, p := range argocdSourceFiles(app.Path, app.Name) {
		if _, ok := t.file(p); ok {
			return 0, objectNotes(objs, why+"; Argo CD merges "+p+" into its options: set the value there")
		}
	}
	src := objs[0].Source
	switch {
	case strings.HasPrefix(src, "Helm chart "):
		m.source = []step{"spec", "source"}
		return adoptInto(t, helmSource{m: m, chart: strings.TrimPrefix(src, "Helm chart ")}, objs, why)
	case strings.HasPrefix(src, "sources of "):
		return adoptSources(t, m, objs, why)
	}
	m.source = []step{"spec", "source"}
	return adoptInto(t, kustomizeSource{m: m}, objs, why)
}

// argocdSourceFiles are the override files Argo CD merges into a source's options.
func argocdSourceFiles(sourcePath, app string) []string {
	return []string{path.Join(sourcePath, ".argocd-source.yaml"), path.Join(sourcePath, ".argocd-source-"+app+".yaml")}
}

// adoptSources adopts into the Helm sources of a multi-source Application: each object into the
// chart of this repository that renders it.
func adoptSources(t *tree, m appManifest, objs []drift.Object, why string) (int, []string) {
	app, _, err := m.app(t)
	if err != nil {
		return 0, objectNotes(objs, why+"; "+err.Error())
	}
	left := objs
	n, notes := 0, []string(nil)
	for j, s := range app.Sources {
		if _, ok := t.file(path.Join(s.Path, "Chart.yaml")); s.Path == "" || !ok || len(left) == 0 {
			continue
		}
		sm := m
		sm.source = []step{"spec", "sources", j}
		h := helmSource{m: sm, chart: path.Clean(s.Path)}
		res, err := h.render(t)
		if err != nil {
			continue
		}
		var mine, rest []drift.Object
		for _, o := range left {
			if renderedObject(res, o) != nil {
				mine = append(mine, o)
			} else {
				rest = append(rest, o)
			}
		}
		if len(mine) > 0 {
			k, more := adoptInto(t, h, mine, why)
			n, notes = n+k, append(notes, more...)
		}
		left = rest
	}
	return n, append(notes, objectNotes(left, why+"; no Helm chart of this repository among its sources renders it")...)
}

func objectNotes(objs []drift.Object, note string) []string {
	var out []string
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%s %s/%s: %s", o.Kind, o.Namespace, o.Name, note))
	}
	return out
}

// adoptInto adopts each drifted field of objs into the one change of s's options that makes it
// its live value and changes nothing else in the render but drifted fields to their live
// values. A field no change, or more than one, does that for is a note that says so.
func adoptInto(t *tree, s optionSource, objs []drift.Object, why string) (int, []string) {
	base, err := s.render(t)
	if err != nil {
		return 0, objectNotes(objs, why+"; its source does not render: "+err.Error())
	}
	done := map[[2]int]bool{}
	n := 0
	var notes []string
	for i, o := range objs {
		if renderedObject(base, o) == nil {
			notes = append(notes, objectNotes([]drift.Object{o}, why+"; its Application's source does not render it")...)
			continue
		}
		for j, f := range o.Fields {
			if done[[2]int{i, j}] {
				continue
			}
			note := func(s string) {
				notes = append(notes, fmt.Sprintf("%s %s/%s %s: %s", o.Kind, o.Namespace, o.Name, f.Path, s))
			}
			if f.Change != drift.Changed {
				note(why + "; a field " + f.Change + " by hand: no value of the Application's options says whether it is there")
				continue
			}
			if v, ok := valueAt(renderedObject(base, o), f); !ok || !equalValue(v, f.Desired) {
				note(fmt.Sprintf("%s; its source renders %v there, not Git's value as audited (%v)", why, v, f.Desired))
				continue
			}
			cands, err := s.candidates(t, o, f)
			if err != nil {
				note(why + "; " + err.Error())
				continue
			}
			var pass []candidate
			var next *tree
			var nextRes *render.Result
			tooMany := false
			for _, part := range []bool{false, true} {
				tier := tierOf(cands, part)
				if len(tier) > maxCandidates {
					note(fmt.Sprintf("%s; %d values of its options hold Git's value: too many to try", why, len(tier)))
					tooMany = true
					break
				}
				for _, c := range tier {
					t2, err := c.apply(t)
					if err != nil {
						continue
					}
					res, err := s.render(t2)
					if err == nil && changedOnly(base, res, objs, o, f) {
						pass, next, nextRes = append(pass, c), t2, res
					}
				}
				if len(pass) > 0 {
					break
				}
			}
			switch len(pass) {
			case 0:
				switch {
				case tooMany:
				case !renders(t, s, base):
					note(why + "; its chart renders differently each time (random or generated values: randAlphaNum, uuidv4, genCA), so no render shows what one value changes")
				default:
					note(why + "; no value of its options sets it alone")
				}
				continue
			case 1:
			default:
				note(why + "; each of these values sets it, none is written: " + candidateList(pass))
				continue
			}
			*t, base = *next, nextRes
			n += markDone(base, objs, done)
		}
	}
	return n, notes
}

// candidateList is each of pass as its key and where it is, comma-separated.
func candidateList(pass []candidate) string {
	var keys []string
	for _, c := range pass {
		keys = append(keys, c.key+" ("+c.where+")")
	}
	return strings.Join(keys, ", ")
}

// tierOf is the candidates of cands that are (part) or are not parts of a value.
func tierOf(cands []candidate, part bool) []candidate {
	var tier []candidate
	for _, c := range cands {
		if c.part == part {
			tier = append(tier, c)
		}
	}
	return tier
}

// markDone marks in done each changed field of objs that base now renders as live has it, and
// returns how many it marked.
func markDone(base *render.Result, objs []drift.Object, done map[[2]int]bool) int {
	n := 0
	for i2, o2 := range objs {
		for j2, f2 := range o2.Fields {
			if v, ok := valueAt(renderedObject(base, o2), f2); !done[[2]int{i2, j2}] && ok && f2.Change == drift.Changed && equalValue(v, f2.Live) {
				done[[2]int{i2, j2}] = true
				n++
			}
		}
	}
	return n
}

// renders says whether s renders from t what it rendered as base: false for a chart with random
// or generated values (randAlphaNum, uuidv4, genCA), which renders differently each time.
func renders(t *tree, s optionSource, base *render.Result) bool {
	again, err := s.render(t)
	if err != nil || len(again.Objects) != len(base.Objects) {
		return false
	}
	for i, u := range base.Objects {
		if !equalValue(u.Object, again.Objects[i].Object) {
			return false
		}
	}
	return true
}
