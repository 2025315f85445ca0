package live

import (
	"fmt"
	"slices"
	"strings"
	"time"

	kversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
)

// Server is what Argo CD's application controller reads of a cluster for its repo-server's
// renders: the server version (as the controller sends it since Argo CD 3.6: "v" and what
// ParseGeneric prints, e.g. v1.37.2, vendor suffixes dropped) and every API version
// it serves, as "group/version" and "group/version/Kind" (of resources that can be listed and
// watched, in every version served), sorted.
type Server struct {
	Version     string
	APIVersions []string
}

// ServerTTL is how long Server answers from what discovery last said.
var ServerTTL = time.Minute

// Server reads the cluster's version and API versions through discovery, at most once per
// ServerTTL. A group that fails discovery (an aggregated API down) leaves its versions out, as
// it does for Argo CD.
func (c *Cache) Server() (Server, error) {
	c.serverMu.Lock()
	defer c.serverMu.Unlock()
	if c.server != nil && time.Since(c.serverAt) < ServerTTL {
		return *c.server, nil
	}
	v, err := c.disc.ServerVersion()
	if err != nil {
		return Server{}, fmt.Errorf("server version: %w", err)
	}
	parsed, err := kversion.ParseGeneric(v.GitVersion)
	if err != nil {
		return Server{}, fmt.Errorf("server version %q: %w", v.GitVersion, err)
	}
	_, lists, err := c.disc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return Server{}, fmt.Errorf("api resources: %w", err)
	}
	seen := map[string]bool{}
	// The repo-server keys its manifest cache on this string and these versions: sent exactly as
	// the controller sends them, an audit reads the render Argo CD already made.
	s := Server{Version: "v" + parsed.String()}
	for _, l := range lists {
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			for _, k := range []string{l.GroupVersion, l.GroupVersion + "/" + r.Kind} {
				if !seen[k] {
					seen[k] = true
					s.APIVersions = append(s.APIVersions, k)
				}
			}
		}
	}
	slices.Sort(s.APIVersions)
	c.server, c.serverAt = &s, time.Now()
	return s, nil
}
