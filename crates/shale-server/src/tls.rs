//! TLS for clients and replicas (rustls through tonic), from PEM files.
//!
//! A cluster has one certificate authority, which issues each replica a certificate for
//! the names and addresses it is reached at (`scripts/make-certs.sh` makes a set for a
//! local cluster). A node serves TLS with its certificate; it asks every connection for a
//! client certificate and accepts one only if that authority issued it, and a connection
//! without one is still accepted, for clients. The replicas' Raft RPCs require that
//! certificate (mutual TLS); clients authenticate by token, so a client's credentials can
//! never send a Raft RPC. The authority issues replica certificates only.

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::error::{Error, Result};

/// Where a node's TLS files are.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The node's certificate chain (PEM).
    pub cert: PathBuf,
    /// The node's private key (PEM).
    pub key: PathBuf,
    /// The cluster's certificate authority (PEM): it verifies peers and replicas' client
    /// certificates.
    pub ca: PathBuf,
}

/// A node's TLS material, loaded.
#[derive(Clone, Debug)]
pub struct Tls {
    identity: Identity,
    ca: Certificate,
}

fn read_pem(what: &str, path: &Path) -> Result<Vec<u8>> {
    let pem = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
    if !pem.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(Error::Config(vec![format!(
            "{what} {}: not a PEM file",
            path.display()
        )]));
    }
    Ok(pem)
}

impl Tls {
    /// Read `files`.
    ///
    /// # Errors
    /// `Io` for a file that cannot be read, `Config` for one that is not PEM (a key or
    /// certificate that does not parse is refused when the server starts).
    pub fn load(files: &TlsFiles) -> Result<Tls> {
        let cert = read_pem("certificate", &files.cert)?;
        let key = read_pem("key", &files.key)?;
        let ca = read_pem("certificate authority", &files.ca)?;
        Ok(Tls {
            identity: Identity::from_pem(cert, key),
            ca: Certificate::from_pem(ca),
        })
    }

    /// The server side: this node's certificate; client certificates from the cluster's
    /// authority verified when presented, not required.
    pub fn server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .client_ca_root(self.ca.clone())
            .client_auth_optional(true)
    }

    /// The replica side of a connection to a peer: the peer verified by the authority,
    /// this node's certificate presented.
    pub fn peer(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(self.ca.clone())
            .identity(self.identity.clone())
    }
}

/// True if the request came over TLS with a client certificate the cluster's authority
/// issued (rustls verified it during the handshake): a replica.
pub fn from_replica<T>(req: &tonic::Request<T>) -> bool {
    req.peer_certs().is_some_and(|certs| !certs.is_empty())
}
