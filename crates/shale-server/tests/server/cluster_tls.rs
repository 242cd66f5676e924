//! A cluster over TLS: replicas reach each other by mutual TLS, clients by TLS and a token;
//! a client's credentials cannot send a Raft RPC, a certificate from another authority is
//! refused at the handshake, a plaintext client gets nowhere, and a node without TLS
//! refuses to listen beyond loopback.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::Cluster;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
use shale_client::Client;
use shale_server::network::endpoint;
use shale_server::pb::raft_client::RaftClient;
use shale_server::{Server, ServerConfig};
use tonic::transport::{ClientTlsConfig, Identity};

const TOKEN: &str = "s3cret-token";

/// A certificate authority named `name`.
fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

/// A certificate for 127.0.0.1 and localhost issued by `ca`: (certificate, key) in PEM.
fn issue(ca: &CertifiedIssuer<'static, KeyPair>) -> (String, String) {
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("parameters");
    params
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, ca).expect("sign");
    (cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write a PEM file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_use_mutual_tls_and_clients_tls_with_a_token() {
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = authority("shale test cluster");
    write(certs.path(), "ca.pem", &ca.pem());
    for id in 1..=3 {
        let (cert, key) = issue(&ca);
        write(certs.path(), &format!("node-{id}.pem"), &cert);
        write(certs.path(), &format!("node-{id}.key"), &key);
    }
    let mut t = common::timings();
    t.token = Some(TOKEN.to_string());
    t.tls_dir = Some(certs.path().to_path_buf());
    // The cluster elects a leader: the replicas' RPCs pass over mutual TLS.
    let cluster = Cluster::start(3, t).await;
    let ca_pem = ca.pem();

    let client = Client::new(cluster.endpoints(), Some(TOKEN.to_string()))
        .expect("client")
        .with_tls(&ca_pem)
        .with_deadline(Duration::from_secs(10));
    client.put(b"over", b"tls").await.expect("put over TLS");
    for addr in cluster.endpoints() {
        let one = Client::new(vec![addr.clone()], Some(TOKEN.to_string()))
            .expect("client")
            .with_tls(&ca_pem);
        assert_eq!(
            one.get(b"over").await.expect("get over TLS"),
            Some(b"tls".to_vec()),
            "{addr}"
        );
    }

    let addr = cluster.endpoints().into_iter().next().expect("an address");
    // Without the token, TLS alone admits no client.
    let no_token = Client::new(vec![addr.clone()], None)
        .expect("client")
        .with_tls(&ca_pem)
        .with_deadline(Duration::from_secs(2));
    let err = no_token.get(b"over").await.expect_err("no token");
    assert!(err.to_string().contains("token"), "{err}");

    // Plaintext to a TLS node fails (and does not hang).
    let plain = Client::new(vec![addr.clone()], Some(TOKEN.to_string()))
        .expect("client")
        .with_deadline(Duration::from_secs(2));
    assert!(plain.get(b"over").await.is_err(), "plaintext got an answer");

    // A client's credentials (TLS without a certificate, the token) send no Raft RPC.
    let status = vote(&addr, shale_client::wire::tls(&ca_pem)).await;
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");

    // A certificate another authority issued is refused at the handshake.
    let rogue = authority("another cluster");
    let (cert, key) = issue(&rogue);
    let rogue_tls = shale_client::wire::tls(&ca_pem).identity(Identity::from_pem(cert, key));
    let status = vote(&addr, rogue_tls).await;
    assert_ne!(status.code(), tonic::Code::Ok);
    assert_ne!(
        status.code(),
        tonic::Code::PermissionDenied,
        "refused before the RPC: {status:?}"
    );

    cluster.stop_all().await;
}

/// A Vote RPC to `addr` over `tls`, with the token; its status.
async fn vote(addr: &str, tls: ClientTlsConfig) -> tonic::Status {
    let channel = endpoint(addr, Some(&tls)).expect("endpoint").connect_lazy();
    let mut raft = RaftClient::new(channel);
    let mut req =
        shale_server::network::with_token(shale_server::pb::VoteRequest::default(), Some(TOKEN));
    req.set_timeout(Duration::from_secs(2));
    match raft.vote(req).await {
        Ok(resp) => panic!("a Raft RPC was answered: {resp:?}"),
        Err(status) => status,
    }
}

#[tokio::test]
async fn plaintext_only_on_loopback_unless_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let anywhere: SocketAddr = "0.0.0.0:0".parse().expect("address");
    let cfg = ServerConfig::new(1, anywhere, dir.path());
    let Err(err) = Server::start(cfg.clone()).await else {
        panic!("a node without TLS listened on {anywhere}");
    };
    assert!(err.to_string().contains("loopback"), "{err}");
    let mut allowed = cfg;
    allowed.allow_plaintext = true;
    let server = Server::start(allowed).await.expect("allowed explicitly");
    server.shutdown().await.expect("shutdown");
}
