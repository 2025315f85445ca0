package episode

import (
	"sort"
)

// Open returns the open episodes of env (every env when env is ""), oldest first.
func (b *Book) Open(env string) []Episode {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Episode
	for _, e := range b.open {
		if env == "" || e.Env == env {
			out = append(out, *e)
		}
	}
	sortByStart(out)
	return out
}

// Ended returns up to n ended episodes of env (every env when env is ""), the most recently
// ended first (n <= 0: all kept).
func (b *Book) Ended(env string, n int) []Episode {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Episode
	for i := len(b.ended) - 1; i >= 0 && (n <= 0 || len(out) < n); i-- {
		if env == "" || b.ended[i].Env == env {
			out = append(out, b.ended[i])
		}
	}
	return out
}

// LastEnded returns the most recently ended episode of a drift identity (see Identity).
func (b *Book) LastEnded(identity string) (Episode, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.ended) - 1; i >= 0; i-- {
		if b.ended[i].identity() == identity {
			return b.ended[i], true
		}
	}
	return Episode{}, false
}

func sortByStart(es []Episode) {
	sort.Slice(es, func(i, j int) bool {
		if !es[i].Start.Equal(es[j].Start) {
			return es[i].Start.Before(es[j].Start)
		}
		return es[i].ID < es[j].ID
	})
}
