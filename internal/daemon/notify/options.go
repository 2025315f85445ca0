package notify

import (
	"strings"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Options shape messages.
type Options struct {
	// ArgoCDURL is the Argo CD UI base URL; when set messages link <url>/applications/<app>.
	ArgoCDURL string
	// AppName maps an env to its Argo CD application; default "llm-"+env.
	AppName func(env string) string
	// ReadFile reads a file of the repository at a revision (name slash-separated from its root;
	// an absent file is an error wrapping fs.ErrNotExist). The adopt patch is written against the
	// overlay's files at the audited revision; without ReadFile a message offers none.
	ReadFile func(revision, name string) ([]byte, error)
	// MaxDigestItems is how many items a digest lists before "and K more"; default 10.
	MaxDigestItems int
}

func (o Options) app(env string) string {
	if o.AppName != nil {
		return o.AppName(env)
	}
	return "llm-" + env
}

func (o Options) link(env string) string {
	if o.ArgoCDURL == "" {
		return ""
	}
	return strings.TrimRight(o.ArgoCDURL, "/") + "/applications/" + o.app(env)
}

func (o Options) maxItems() int {
	if o.MaxDigestItems > 0 {
		return o.MaxDigestItems
	}
	return 10
}

// newMessage is message.New with the env's Argo CD link.
func newMessage(kind message.Kind, env, title string, lines []message.Line, keys []string, opts Options) message.Message {
	return message.New(kind, env, title, lines, keys, opts.link(env))
}

// objectName is "Kind namespace/name" (or "Kind name" when cluster-scoped).
func objectName(o drift.Object) string {
	name := o.Kind + " " + o.Name
	if o.Namespace != "" {
		name = o.Kind + " " + o.Namespace + "/" + o.Name
	}
	if o.Cluster != "" {
		name += " on cluster " + o.Cluster
	}
	return name
}
