package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/platform/profile"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// scalingPath is the file that sets the ScaledObject's minimum for the env: the one a schedule
// peak of it already raises, else overlays/<env>/scaling.yaml when there is one, else the base.
func scalingPath(s profile.Settings, env string, has func(string) bool) string {
	if s.Schedule != nil {
		_, name, _ := strings.Cut(s.ScaledObject, "/")
		for _, p := range s.Schedule.Peaks {
			if p.Target.Kind == "ScaledObject" && p.Target.Name == name {
				return p.Target.Path
			}
		}
	}
	if p := "overlays/" + env + "/scaling.yaml"; has(p) {
		return p
	}
	return "overlays/" + env + "/kustomization.yaml"
}

type fileChange struct {
	path          string
	before, after []byte
}

// changes are the profile file and, when peaks are missing, the schedule with them appended.
func (o *profileOptions) changes(read func(string) ([]byte, error), has func(string) bool, p *profile.Profile, prop *profile.Proposal, schedFile string, schedData []byte) ([]fileChange, error) {
	var out []fileChange
	file := profile.Path(o.env, o.model)
	data, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	var before []byte
	if has(file) {
		if before, err = read(file); err != nil {
			return nil, err
		}
	}
	out = append(out, fileChange{file, before, data})
	var add []string
	for _, pk := range prop.Peaks {
		if pk.Action == profile.Add {
			add = append(add, pk.Entry)
		}
	}
	if len(add) == 0 {
		return out, nil
	}
	after := append([]byte(nil), schedData...)
	if len(after) == 0 {
		after = []byte("# Scheduled pre-peak scale-ups (read by `auditor schedule`, never synced by Argo CD).\npeaks:\n")
	} else if after[len(after)-1] != '\n' {
		after = append(after, '\n')
	}
	after = append(after, "\n"+strings.Join(add, "\n")...)
	if _, err := schedule.Parse(schedFile, after); err != nil {
		return nil, errors.Join(errors.New("the proposed peaks do not make a valid schedule"), err)
	}
	return append(out, fileChange{schedFile, schedData, after}), nil
}

func writeProfile(w io.Writer, p *profile.Profile, prop *profile.Proposal, s profile.Settings, loc *time.Location) {
	fmt.Fprintf(w, "Profile of %s (Service %s), %s to %s, %s (%d hours)\n", p.Model, p.Service,
		p.From.In(loc).Format("2006-01-02 15:04"), p.To.In(loc).Format("2006-01-02 15:04"), loc, len(p.Hourly))
	busiest := 0
	for i, r := range p.Hourly {
		if r > p.Hourly[busiest] {
			busiest = i
		}
	}
	fmt.Fprintf(w, "  busiest hour: %s req/s, %s\n", fnum(p.Hourly[busiest]), p.From.In(loc).Add(time.Duration(busiest)*time.Hour).Format("Mon 2006-01-02 15:04"))
	fmt.Fprintf(w, "  prompt tokens p50 %s, p95 %s; response tokens p50 %s, p95 %s\n",
		fnum(p.Tokens.Prompt.P50), fnum(p.Tokens.Prompt.P95), fnum(p.Tokens.Response.P50), fnum(p.Tokens.Response.P95))
	fmt.Fprintf(w, "  time to first token p50 %s s, p95 %s s\n", fnum(p.TTFT.P50), fnum(p.TTFT.P95))
	if p.Replica.Samples > 0 {
		fmt.Fprintf(w, "  one replica at saturation: %s req/s, %s generated tokens/s (median of %d pod samples with a queue)\n",
			fnum(p.Replica.RequestsPerSecond), fnum(p.Replica.TokensPerSecond), p.Replica.Samples)
	}
	if prop.PerReplica == 0 {
		for _, n := range prop.Notes {
			fmt.Fprintf(w, "NOTE %s\n", n)
		}
		return
	}
	fmt.Fprintf(w, "\nQueue threshold of ScaledObject %s: %s -> %s\n  %s\n", s.ScaledObject, fnum(prop.Threshold.Now), fnum(prop.Threshold.Proposed), prop.Threshold.Arithmetic)
	fmt.Fprintf(w, "\nMinimum replicas by hour (%s; warm minimum %d in business hours):\n", loc, s.WarmMinimum)
	for _, d := range prop.Minimums {
		var parts []string
		for _, r := range d.Ranges {
			parts = append(parts, fmt.Sprintf("%02d-%02d: %d", r.From, r.To, r.Replicas))
		}
		fmt.Fprintf(w, "  %s  %s\n", d.Day, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w, "\nPeaks:")
	if len(prop.Peaks) == 0 {
		fmt.Fprintln(w, "  none above the warm minimum")
	}
	for _, pk := range prop.Peaks {
		when := pk.When()
		if pk.Kind == profile.Monthly {
			when += " (seen " + strings.Join(pk.Seen, ", ") + ")"
		}
		verdict := "MISSING from the schedule: added below"
		switch pk.Action {
		case profile.Covered:
			verdict = "covered by schedule peak " + pk.CoveredBy
		case profile.Raise:
			verdict = fmt.Sprintf("schedule peak %s holds it with too few replicas: raise its warm to %d", pk.CoveredBy, pk.Warm)
		}
		warm := fmt.Sprint(pk.Warm)
		if pk.LowerBound {
			warm = "at least " + warm
		}
		fmt.Fprintf(w, "  %s: %s at %s for %s, warm %s\n    %s\n    %s\n", pk.Name, when, pk.At, pk.Duration, warm, pk.Arithmetic, verdict)
		if len(pk.Overlaps) > 0 {
			fmt.Fprintf(w, "    overlaps %s on the same field: the schedule composes them (a scale-down restores what the others leave)\n", strings.Join(pk.Overlaps, ", "))
		}
	}
	if prop.Lead != "" {
		fmt.Fprintf(w, "  lead time: %s\n", prop.Lead)
	}
	if c := prop.Cost; c != nil {
		fmt.Fprintf(w, "\nCost (%s):\n  %s\n  %s\n", c.Basis, c.Now, c.Proposed)
	}
	for _, n := range prop.Notes {
		fmt.Fprintf(w, "NOTE %s\n", n)
	}
}

func fnum(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
