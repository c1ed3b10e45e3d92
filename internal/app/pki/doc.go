// Package pki gives kplane a private certificate authority so that
// `kplane serve` speaks TLS and authenticates its admin from the first run,
// with nothing for the operator to prepare.
//
// Ensure keeps seven files in the data dir: ca.crt/ca.key (the CA),
// serving.crt/serving.key (the API server's certificate),
// admin.crt/admin.key (a client certificate for the cluster admin) and
// sa.key (the key that signs service account tokens). It
// creates whatever is missing and reissues the two leaf certificates when they
// near expiry or no longer fit (new host names, another CA, a half-written
// pair); WriteKubeconfig hands the admin credential to kubectl.
//
// What it guarantees:
//   - Private keys are ECDSA P-256, written with mode 0600 into a 0700 dir,
//     each file replaced atomically (temp file, fsync, rename, fsync dir), so
//     a crash leaves either the old file or the new one, never half of one.
//   - A file that exists but cannot be parsed is reported, naming the file,
//     and never overwritten: it may be an operator's own credential.
//   - The CA is never replaced behind the operator's back, since that would
//     invalidate every kubeconfig already handed out. Leaves are reissued from
//     the same CA, so existing kubeconfigs keep working. Nor is sa.key: a
//     new one would invalidate every service account token issued.
//
// What it does not do:
//   - No CA rotation: when the CA (10 years) expires, Ensure fails and the
//     operator removes ca.crt and ca.key to start over.
//   - No revocation: a reissued admin certificate does not invalidate the old
//     one, which stays valid until it expires. Protect ca.key and admin.key.
//   - No authorization model: any client certificate signed by the CA is
//     accepted, and the one this package issues (CN kplane-admin, O
//     system:masters) means "admin". Clients without a certificate may still
//     connect (tls.VerifyClientCertIfGiven); rejecting or authenticating them
//     some other way is the API server's job.
package pki
