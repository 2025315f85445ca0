// Package site owns a site's values: the names that make the template one organisation's platform
// (its Git URL, domain, issuer, secret store, Argo CD's address, image registry, cloud account).
// Each env keeps them in overlays/<env>/site/site.yaml, a local-config ConfigMap that
// components/site copies into the rendered objects with kustomize replacements. Set writes a
// value there and in the two places kustomize cannot reach: the bootstrap Application
// (clusters/<env>/root.yaml) and the image names of the overlay's `images`. Examples finds
// what a render still carries of the template's example names.
package site

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// TemplateAnnotation marks a site file whose values are still the template's: its examples are
// then warnings, not errors. Set removes it.
const TemplateAnnotation = "platform.llm/template"

// Key is one site value.
type Key struct {
	Name string
	// Help says what the value is and where it goes.
	Help string
	// Example is the template's value (of prod; the domain differs per env).
	Example string
	check   func(string) error
}

// Keys are the site values, in the order the site files list them.
var Keys = []Key{
	{"gitURL", "the platform repository: Argo CD's source, its projects' allowed source, the auditor's repo", "https://git.example.com/platform/llm-gitops.git", gitURL},
	{"gitWebURL", "where a browser reads the repository's files at main: alerts link their runbooks there", "https://git.example.com/platform/llm-gitops/blob/main", httpURL},
	{"domain", "the API's public name: the Gateway's https listener and its certificate", "llm.example.com", dnsName},
	{"issuer", "the cert-manager ClusterIssuer that signs the Gateway's certificate", "platform", objectName},
	{"secretStore", "the External Secrets ClusterSecretStore every secret is read from", "platform", objectName},
	{"argocdURL", "Argo CD's web address, linked from drift reports", "https://argocd.example.com", httpURL},
	{"registry", "the registry and path of the platform's own images (rag-api, the batch jobs, the auditor)", "registry.example.com/llm", registry},
	{"nodeRole", "the IAM role of the nodes Karpenter starts", "KarpenterNodeRole-llm-platform", nonEmpty},
	{"clusterName", "the karpenter.sh/discovery tag of the cluster's subnets and security groups", "llm-platform", nonEmpty},
	{"nvidiaCharts", "the Helm repository of the NVIDIA GPU Operator chart: NVIDIA's, or the site's mirror when air-gapped", "https://helm.ngc.nvidia.com/nvidia", httpURL},
}

// Lookup returns the key named name.
func Lookup(name string) (Key, bool) {
	i := slices.IndexFunc(Keys, func(k Key) bool { return k.Name == name })
	if i < 0 {
		return Key{}, false
	}
	return Keys[i], true
}

// Names lists the keys' names.
func Names() []string {
	out := make([]string, len(Keys))
	for i, k := range Keys {
		out[i] = k.Name
	}
	return out
}

// Check says why value cannot be the key's value; nil when it can.
func (k Key) Check(value string) error {
	if value != strings.TrimSpace(value) || strings.ContainsAny(value, "\n\r\t") {
		return fmt.Errorf("%s: %q has spaces or line breaks around it", k.Name, value)
	}
	if err := k.check(value); err != nil {
		return fmt.Errorf("%s: %w", k.Name, err)
	}
	return nil
}

// Path is the site file of env, from the repository root.
func Path(env string) string { return path.Join("overlays", env, "site", "site.yaml") }

// Values are one env's site values as its file holds them.
type Values struct {
	Env  string `json:"env"`
	File string `json:"file"`
	// Template is true while the file is marked as the template's (TemplateAnnotation).
	Template bool              `json:"template"`
	Values   map[string]string `json:"values"`
}

// Parse reads the site file of env.
func Parse(env string, data []byte) (*Values, error) {
	var cm struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name        string            `yaml:"name"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
	}
	file := Path(env)
	if err := yaml.Unmarshal(data, &cm); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Name != "site" {
		return nil, fmt.Errorf("%s: not the ConfigMap `site` (kind %q, name %q)", file, cm.Kind, cm.Metadata.Name)
	}
	v := &Values{Env: env, File: file, Template: cm.Metadata.Annotations[TemplateAnnotation] == "true", Values: cm.Data}
	if v.Values == nil {
		v.Values = map[string]string{}
	}
	return v, nil
}

// hostish are the runs of a string a host name can be part of.
var hostish = regexp.MustCompile(`[A-Za-z0-9.-]+`)

// Examples returns the example names s carries, each once: the domains RFC 2606 reserves for
// documentation (example.com, example.net, example.org) and their subdomains.
func Examples(s string) []string {
	var out []string
	for _, tok := range hostish.FindAllString(s, -1) {
		name := strings.ToLower(strings.Trim(tok, ".-"))
		for _, d := range []string{"example.com", "example.net", "example.org"} {
			if (name == d || strings.HasSuffix(name, "."+d)) && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// KeyFor names the site key whose value of v is in s: what to set to get rid of an example.
func (v *Values) KeyFor(s string) string {
	best := ""
	for _, k := range Keys {
		val := v.Values[k.Name]
		if val != "" && strings.Contains(s, val) && len(val) > len(v.Values[best]) {
			best = k.Name
		}
	}
	return best
}

func gitURL(s string) error {
	if strings.HasPrefix(s, "git@") && strings.Contains(s, ":") { // scp-like ssh
		return nil
	}
	u, err := url.Parse(s)
	local := err == nil && u.Scheme == "file" && u.Path != "" // a repository on this machine (tests, demos)
	if !local && (err != nil || u.Host == "" || !slices.Contains([]string{"https", "http", "ssh", "git"}, u.Scheme)) {
		return fmt.Errorf("%q is not a Git URL (https://host/path.git, ssh://…, git@host:path)", s)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return fmt.Errorf("%q carries a password: it would be committed; give Argo CD and the auditor credentials of their own", u.Redacted())
	}
	return nil
}

func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	if strings.HasSuffix(s, "/") {
		return fmt.Errorf("%q: no trailing slash (paths are appended to it)", s)
	}
	return nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func dnsName(s string) error {
	labels := strings.Split(strings.TrimPrefix(s, "*."), ".")
	if len(s) > 253 || len(labels) < 2 {
		return fmt.Errorf("%q is not a fully qualified DNS name", s)
	}
	for _, l := range labels {
		if !dnsLabel.MatchString(l) {
			return fmt.Errorf("%q is not a DNS name (label %q)", s, l)
		}
	}
	return nil
}

func objectName(s string) error {
	if err := dnsName(s + ".x"); err != nil || len(s) > 253 {
		return fmt.Errorf("%q is not a Kubernetes object name", s)
	}
	return nil
}

func registry(s string) error {
	host, rest, _ := strings.Cut(s, "/")
	if host == "" || strings.Contains(s, "://") || strings.HasSuffix(s, "/") || strings.ContainsAny(host, "@ ") || strings.ContainsAny(rest, ":@ ") {
		return fmt.Errorf("%q is not a registry and path (host[:port]/path: no scheme, tag, digest or trailing slash)", s)
	}
	return nil
}

func nonEmpty(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	return nil
}
