package auditlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// byChanges is the write whose held changes set f as it is live: of the writes (oldest first)
// whose changes touch f's path — the change at f's path, or at a path above it (an atomic list
// or map, a list item, a parent removed) or below it (a key of an atomic map f names) — the
// newest, when what it left there is f's live value (nothing, for a removed field). When the
// newest write touching the path left another value there, a write whose changes are not known
// set the live one: nil, and the other rules decide. A write seen only in admission that left
// another value is passed over: the API server may have refused it after.
func byChanges(ws []*write, f *drift.Field) *write {
	if f.Path == "" || f.Path == "." {
		return nil // the whole object (compared without types): not a field
	}
	removed := f.Change == drift.Removed
	for i := len(ws) - 1; i >= 0; i-- {
		touched, agrees := leaves(ws[i].changes, f.Path, f.Live, removed)
		if !touched {
			continue
		}
		if agrees {
			return ws[i]
		}
		if ws[i].admitted {
			// Admitted but not what is live: refused after admission (a later admission step,
			// a quota, a dry run) or overwritten since. An older write may still have set it.
			continue
		}
		return nil
	}
	return nil
}

// leaves says whether changes touch path, and whether every change that does left there what is
// live (live, or nothing when removed).
func leaves(changes []heldChange, path string, live any, removed bool) (touched, agrees bool) {
	agrees = true
	for i := range changes {
		c := &changes[i]
		gone := changeKinds[c.kind] == drift.Removed
		var ok bool
		switch {
		case c.path == path:
			ok = agree(c.to, !gone, live, removed)
		case c.path == ".":
			continue
		case under(path, c.path): // the field lies inside the value the write left
			if gone {
				ok = removed
				break
			}
			v, found, known := lookup(c.to, path[len(c.path):])
			if !known {
				continue // a value kept capped: it does not say
			}
			ok = agree(v, found, live, removed)
		case under(c.path, path): // the write changed part of the field's value
			if removed {
				ok = gone
				break
			}
			v, found, known := lookup(live, c.path[len(path):])
			if !known {
				continue
			}
			ok = agree(c.to, !gone, v, !found)
		default:
			continue
		}
		touched = true
		agrees = agrees && ok
	}
	return touched, agrees
}

// agree says whether a write that left v (present) matches the live value (live, or nothing when
// removed).
func agree(v any, present bool, live any, removed bool) bool {
	if removed || !present {
		return removed && !present
	}
	return sameValue(v, live)
}

// sameValue compares a value a write left with a live one as JSON would: 3 and 3.0 are one
// number. A value kept capped (its start and size, capValue) matches a live value capped the same.
func sameValue(held, live any) bool {
	if reflect.DeepEqual(held, live) {
		return true
	}
	if a, ok := drift.Number(held); ok {
		b, ok := drift.Number(live)
		return ok && a == b
	}
	if s, ok := held.(string); ok {
		c, ok := capValue(live).(string)
		return ok && c == s
	}
	a, err := json.Marshal(held)
	if err != nil {
		return false
	}
	b, err := json.Marshal(live)
	return err == nil && bytes.Equal(a, b)
}

// lookup follows the rest of a display path (".name", `["a.b/c"]`, "[name=vllm]", "[0]") into
// a decoded value: the value there (found), or nothing (not found: a key or item absent); known
// is false when the value does not have the path's shape (a value kept capped is a string).
func lookup(v any, rest string) (value any, found, known bool) {
	for rest != "" {
		if v == nil {
			return nil, false, true
		}
		switch rest[0] {
		case '.':
			end := 1
			for end < len(rest) && rest[end] != '.' && rest[end] != '[' {
				end++
			}
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false, false
			}
			v, ok = m[rest[1:end]]
			if !ok {
				return nil, false, true
			}
			rest = rest[end:]
		case '[':
			if strings.HasPrefix(rest, `["`) {
				q, err := strconv.QuotedPrefix(rest[1:])
				if err != nil || !strings.HasPrefix(rest[1+len(q):], "]") {
					return nil, false, false
				}
				key, _ := strconv.Unquote(q)
				m, ok := v.(map[string]any)
				if !ok {
					return nil, false, false
				}
				v, ok = m[key]
				if !ok {
					return nil, false, true
				}
				rest = rest[2+len(q):]
				continue
			}
			end := strings.IndexByte(rest, ']')
			l, ok := v.([]any)
			if end < 0 || !ok {
				return nil, false, false
			}
			item, ok := listItem(l, rest[1:end])
			if !ok {
				return nil, false, true
			}
			v, rest = item, rest[end+1:]
		default:
			return nil, false, false
		}
	}
	return v, true, true
}

// listItem finds the item a display path's bracket names: by keys (name=vllm,
// containerPort=8000,protocol=TCP), by index, or by value (a set).
func listItem(l []any, sel string) (any, bool) {
	if strings.Contains(sel, "=") {
		pairs := strings.Split(sel, ",")
	items:
		for _, item := range l {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			for _, p := range pairs {
				k, want, _ := strings.Cut(p, "=")
				if got, ok := m[k]; !ok || fmt.Sprint(got) != want {
					continue items
				}
			}
			return item, true
		}
		return nil, false
	}
	if i, err := strconv.Atoi(sel); err == nil {
		if i >= 0 && i < len(l) {
			return l[i], true
		}
		return nil, false
	}
	for _, item := range l {
		if fmt.Sprint(item) == sel {
			return item, true
		}
	}
	return nil, false
}
