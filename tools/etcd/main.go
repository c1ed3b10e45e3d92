// Command etcd runs a single-member etcd server from etcd's own embed
// package. kplane's tests build and start it (see internal/kv/etcdkv/etcdtest)
// to check the etcd engine, and the embedded engine, against real etcd.
// It lives in its own module so that etcd's server never enters kplane's
// dependencies.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dir := flag.String("data-dir", "", "data directory")
	client := flag.String("listen-client", "http://127.0.0.1:2379", "client URL")
	peer := flag.String("listen-peer", "http://127.0.0.1:2380", "peer URL")
	maxRequest := flag.Uint("max-request-bytes", 2<<20+64<<10, "largest request accepted")
	progress := flag.Duration("progress-notify-interval", time.Second, "interval of watch progress notifications")
	logFile := flag.String("log-file", "", "where etcd logs (default stderr)")
	flag.Parse()

	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatal(err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.MaxRequestBytes = *maxRequest
	cfg.WatchProgressNotifyInterval = *progress
	if *logFile != "" {
		cfg.LogOutputs = []string{*logFile}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		log.Fatal("etcd did not become ready in 60s")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case <-sig:
	case err := <-e.Err():
		log.Print(err)
	}
	e.Close()
}
