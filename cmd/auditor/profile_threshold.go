package main

import (
	"fmt"
	"io/fs"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/adopt"
	"github.com/llm-gitops/platform/internal/platform/capacity"
	"github.com/llm-gitops/platform/internal/platform/check"
	"github.com/llm-gitops/platform/internal/platform/profile"
)

// maxNumSeqs sizes the Deployment's --max-num-seqs at the profile's p95 lengths, as auditor
// check does once the profile is in Git; "" when the Deployment lacks the model facts.
func maxNumSeqs(wl profile.Workload, p *profile.Profile) string {
	cfg := check.SeqsConfigOf(wl.Deployment)
	cfg.Traffic = capacity.Traffic{PromptTokens: int64(math.Ceil(p.Tokens.Prompt.P95)), ResponseTokens: int64(math.Ceil(p.Tokens.Response.P95))}
	fit, err := capacity.SizeMaxNumSeqs(cfg)
	if err != nil {
		return ""
	}
	return fit.Explanation
}

// thresholdPatchFile is the overlay file that holds a ScaledObject's threshold from a profile: one
// per ScaledObject, so that two of one model never share a patch and its target.
func thresholdPatchFile(scaledObject string) string { return "profile-" + scaledObject + ".yaml" }

// thresholdPatch writes the proposed queue threshold into the env's overlay as a JSON patch
// (overlays/<env>/profile-<ScaledObject>.yaml, listed under patches: with its target): the threshold
// sits in a list of the ScaledObject, which a strategic-merge patch of a custom resource cannot
// reach. A test of the trigger's name guards its index. No change when they agree.
func (o *profileOptions) thresholdPatch(read func(string) ([]byte, error), has func(string) bool, p *profile.Profile, prop *profile.Proposal, s profile.Settings) ([]fileChange, error) {
	if prop.PerReplica == 0 || s.Threshold == 0 || prop.Threshold.Proposed == s.Threshold {
		return nil, nil
	}
	ns, name, _ := strings.Cut(s.ScaledObject, "/")
	at := fmt.Sprintf("/spec/triggers/%d", s.Trigger)
	guard := adopt.Op{Op: "test", Path: at + "/name", Value: s.TriggerName}
	if s.TriggerName == "" { // a trigger's name is optional: its query tells it then
		guard = adopt.Op{Op: "test", Path: at + "/metadata/query", Value: s.TriggerQuery}
	}
	ops := []adopt.Op{guard, {Op: "replace", Path: at + "/metadata/threshold", Value: strconv.FormatFloat(prop.Threshold.Proposed, 'f', -1, 64)}}
	head := []string{
		fmt.Sprintf("The queue threshold of ScaledObject %s from the traffic profile %s (auditor profile):", s.ScaledObject, profile.Path(o.env, p.Model)),
		prop.Threshold.Arithmetic + ".",
	}
	a, err := adopt.JSONPatch("overlays/"+o.env, func(name string) ([]byte, error) {
		if !has(name) {
			return nil, fs.ErrNotExist
		}
		return read(name)
	}, thresholdPatchFile(name), adopt.Target{Kind: "ScaledObject", Name: name, Namespace: ns}, head, ops)
	if err != nil {
		return nil, err
	}
	var out []fileChange
	for _, path := range slices.Sorted(maps.Keys(a.Files)) {
		var before []byte
		if has(path) {
			if before, err = read(path); err != nil {
				return nil, err
			}
		}
		out = append(out, fileChange{path, before, a.Files[path]})
	}
	return out, nil
}

// verifyThreshold renders the env from the work tree again and checks that the ScaledObject now
// has the proposed threshold: kustomize skips a patch whose target matches nothing, silently.
func (o *profileOptions) verifyThreshold(want float64) error {
	res, err := o.src.render(o.env)
	if err != nil {
		return fmt.Errorf("render after writing the threshold patch: %w", err)
	}
	wl, err := profile.FindWorkload(res.Objects, o.model, o.deploy)
	if err != nil {
		return err
	}
	if got := wl.Settings().Threshold; got != want {
		return fmt.Errorf("wrote the threshold patch, but overlays/%s renders ScaledObject %s/%s with threshold %s, not %s: does another patch or transformer of the overlay set it after?",
			o.env, wl.ScaledObject.GetNamespace(), wl.ScaledObject.GetName(), fnum(got), fnum(want))
	}
	return nil
}
