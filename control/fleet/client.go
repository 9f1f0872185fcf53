package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vipd/vipd/control/config"
)

// NewClient connects to the fleet's etcd as f says: its endpoints, with
// TLS when f names a CA or a client certificate, and as f's user. It
// does not wait for a connection: the first request does.
func NewClient(f *config.Fleet) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   f.Endpoints,
		DialTimeout: f.DialTimeout.D(),
		Username:    f.User,
		Password:    string(f.Password),
		// A box's watch must notice a partition: gRPC keepalives on
		// the connection, not only on idle requests.
		DialKeepAliveTime:    f.DialTimeout.D(),
		DialKeepAliveTimeout: f.DialTimeout.D(),
		// The client's own zap log stays quiet: the watcher reports
		// what matters (connected, the last etcd error) through vipd's
		// log, status and metrics.
		Logger: zap.NewNop(),
	}
	if f.CAFile != "" || f.CertFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.CAFile != "" {
			pem, err := os.ReadFile(f.CAFile)
			if err != nil {
				return nil, fmt.Errorf("[fleet] ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("[fleet] ca_file %s: no PEM certificate in it", f.CAFile)
			}
			tc.RootCAs = pool
		}
		if f.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("[fleet] cert_file and key_file: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}
