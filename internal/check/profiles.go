package check

import (
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/capacity"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/profile"
	"github.com/llm-gitops/platform/internal/schedule"
)

// trafficProfiles reads the env's measured traffic profiles (clusters/<env>/profiles/*.yaml, by
// `auditor profile`) and holds Git's settings against them (rule traffic-profile):
//   - a file that does not parse, or names a model no Deployment with a ScaledObject serves,
//     is a violation;
//   - a queue threshold other than the one the profile asks for, and a peak of the profile the
//     schedule lacks or holds with too few replicas, are warnings: the profile is of the past,
//     and a setting can differ on purpose, but a reviewer should see it.
//
// It returns each profile's p95 lengths by Deployment name, which size --max-num-seqs.
func trafficProfiles(snap *gitrepo.Snapshot, env string, objs []*unstructured.Unstructured) (measured map[string]capacity.Traffic, violations, warnings []Violation) {
	dir := path.Dir(profile.Path(env, "x"))
	var files []string
	for name := range snap.Files {
		if path.Dir(name) == dir && strings.HasSuffix(name, ".yaml") {
			files = append(files, name)
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, nil, nil
	}
	sched, err := schedule.Load(snap, env)
	if err != nil && !errors.Is(err, schedule.ErrNoSchedule) {
		sched = nil // the schedule rule reports it
	}
	measured = map[string]capacity.Traffic{}
	for _, file := range files {
		add := func(to *[]Violation, format string, a ...any) {
			*to = append(*to, Violation{Rule: "traffic-profile", Object: file, Message: fmt.Sprintf(format, a...)})
		}
		p, err := profile.Parse(file, snap.Files[file])
		if err != nil {
			add(&violations, "%v", err)
			continue
		}
		wl, err := profile.FindWorkload(objs, p.Model, p.Service)
		if err != nil {
			add(&violations, "%v", err)
			continue
		}
		measured[wl.Deployment.GetName()] = capacity.Traffic{
			PromptTokens:   int64(math.Ceil(p.Tokens.Prompt.P95)),
			ResponseTokens: int64(math.Ceil(p.Tokens.Response.P95)),
		}
		settings := wl.Settings()
		settings.Schedule = sched
		prop, err := profile.Propose(p, settings, p.Targets())
		if err != nil {
			add(&violations, "%v", err)
			continue
		}
		loc, _ := p.Location() // Parse checked it
		window := fmt.Sprintf("the profile of %s to %s", p.From.In(loc).Format("2006-01-02"), p.To.In(loc).Format("2006-01-02"))
		if prop.PerReplica > 0 && prop.Threshold.Proposed != settings.Threshold {
			add(&warnings, "ScaledObject %s waits for %s queued requests per replica; %s asks for %s: %s",
				settings.ScaledObject, gnum(settings.Threshold), window, gnum(prop.Threshold.Proposed), prop.Threshold.Arithmetic)
		}
		for _, pk := range prop.Peaks {
			switch pk.Action {
			case profile.Add:
				add(&warnings, "%s found peak %s (%s at %s for %s, warm %d: %s), which %s lacks; `auditor profile --env %s --model %s --write` adds it",
					window, pk.Name, peakWhen(pk), pk.At, pk.Duration, pk.Warm, pk.Arithmetic, schedule.Path(env), env, p.Model)
			case profile.Raise:
				add(&warnings, "%s found peak %s, which schedule peak %s holds with fewer replicas than the %d it needs: %s",
					window, pk.Name, pk.CoveredBy, pk.Warm, pk.Arithmetic)
			}
		}
	}
	return measured, violations, warnings
}

func peakWhen(pk profile.Peak) string {
	if pk.Kind == profile.Weekly {
		return fmt.Sprintf("cron %q", pk.Cron)
	}
	return fmt.Sprintf("days %s of the month", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(pk.DaysOfMonth)), ", "), "[]"))
}

func gnum(v float64) string { return fmt.Sprintf("%g", v) }
