package daemon

import (
	"errors"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// envStates holds each env's last audit: its report (the last that succeeded), its error (the
// last audit's), and when it was last audited in full. The reconciles write it; the status,
// the web view, blame and the API read it. Its lock is taken last: nothing is called under it.
type envStates struct {
	mu       sync.RWMutex
	reports  map[string]*drift.Report
	errs     map[string]error
	lastFull map[string]time.Time
}

func newEnvStates() *envStates {
	return &envStates{reports: map[string]*drift.Report{}, errs: map[string]error{}, lastFull: map[string]time.Time{}}
}

// record keeps env's audit: err, or rep when err is nil (the last report stands otherwise).
func (s *envStates) record(env string, rep *drift.Report, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[env] = err
	if err == nil {
		s.reports[env] = rep
	}
}

// report returns env's last report (nil before its first success) and its last audit's error.
func (s *envStates) report(env string) (*drift.Report, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.reports[env], s.errs[env]
}

// current returns env's last report when its last audit succeeded.
func (s *envStates) current(env string) (*drift.Report, bool) {
	rep, err := s.report(env)
	return rep, rep != nil && err == nil
}

// reportOrError is the API's answer for env: its last report, else its error.
func (s *envStates) reportOrError(env string) (*drift.Report, error) {
	rep, err := s.report(env)
	switch {
	case rep != nil:
		return rep, nil
	case err != nil:
		return nil, err
	}
	return nil, errors.New("no audit yet")
}

// revision is the revision of env's last report ("" before one), and its last audit's error.
func (s *envStates) revision(env string) (string, error) {
	rep, err := s.report(env)
	if rep == nil {
		return "", err
	}
	return rep.Revision, err
}

// startFull records that env's full audit starts now.
func (s *envStates) startFull(env string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastFull[env] = at
}

// sinceFull is how long ago env's last full audit started (a long time before its first).
func (s *envStates) sinceFull(env string) time.Duration {
	s.mu.RLock()
	at, ok := s.lastFull[env]
	s.mu.RUnlock()
	if !ok {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(at)
}

// settled says whether every env has a report, or an error of its own rather than the
// cluster API's.
func (s *envStates) settled(envs []string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, env := range envs {
		if err := s.errs[env]; s.reports[env] == nil && (err == nil || apiError(err)) {
			return false
		}
	}
	return true
}
