// Command redis serves an in-memory Redis (miniredis) on the address given by --addr until it gets
// SIGTERM or SIGINT. Argo CD's controller and repo-server use it as their cache in the test cluster,
// the way Argo CD's own core mode runs one in-process.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alicebob/miniredis/v2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "address to listen on")
	flag.Parse()
	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr(*addr); err != nil {
		fmt.Fprintf(os.Stderr, "redis: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("redis (miniredis) listening on %s\n", srv.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Close()
}
