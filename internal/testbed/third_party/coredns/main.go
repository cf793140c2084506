// Command coredns is CoreDNS with only the plugins the test bed's cluster DNS needs. Leaving out the rest (forward,
// cloud DNS providers, etcd) keeps the build small and keeps cluster DNS from ever reaching outside the machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	// Order matters: CoreDNS runs plugins in the order of this list (the order of its plugin.cfg).
	dnsserver.Directives = []string{"reload", "ready", "health", "errors", "log", "cache", "kubernetes"}
}

func main() { coremain.Run() }
