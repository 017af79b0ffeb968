//! The trust coogle's HTTPS clients use (src/tls.rs), against a loopback HTTPS front whose
//! certificate a throwaway CA signed: `ask_google` and `self-update` reach it only when
//! `SSL_CERT_FILE` names that CA (the bundled Mozilla roots, and nothing of the machine's, are
//! trusted otherwise), and an `SSL_CERT_FILE` that cannot be used is one clear error, never a
//! silent fallback.

use crate::support;

use std::fs;

use serde_json::json;
use support::fake_github::{FakeGithub, release};
use support::gemini_mock::{GeminiMock, Reply};
use support::tls_front::TlsFront;
use support::{Env, fake_mcp};

const KEY: &str = "AIzaSyD-tls-test-0123456789abcdefghijk";

/// Ask `ask_google` once through the HTTPS front, with `SSL_CERT_FILE` as given (`None`: unset).
fn ask_through(front: &TlsFront, ca_file: Option<&std::path::Path>) -> (bool, String) {
    let env = Env::new();
    env.write_config(&json!({
        "servers": {"google": {"command": fake_mcp()}},
        "search": {"apiKey": KEY, "apiBaseUrl": format!("{}/v1beta", front.origin),
                   "retryBaseMs": 10, "maxRetries": 0, "timeoutMs": 10000},
    }));
    let mut cmd = env.cmd();
    match ca_file {
        Some(p) => cmd.env("SSL_CERT_FILE", p),
        None => cmd.env_remove("SSL_CERT_FILE"),
    };
    // Nothing of the machine's trust may make a difference.
    cmd.env_remove("SSL_CERT_DIR");
    let mut shim = env.stdio_server(cmd, &["search-server"]);
    shim.initialize();
    let r = shim.call("ask_google", json!({"question": "What is new in Rust?"}));
    assert!(r.get("error").is_none(), "a protocol error: {r}");
    (
        r["result"]["isError"].as_bool().unwrap_or(false),
        support::text(&r),
    )
}

#[test]
fn ask_google_trusts_the_ca_in_ssl_cert_file_and_only_then() {
    let mock = GeminiMock::start(vec![Reply::answer("Rust 1.95 is out.", None)]);
    let front = TlsFront::start(&mock.base);
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("corporate-ca.pem");
    fs::write(&ca, &front.ca_pem).unwrap();

    let (is_error, text) = ask_through(&front, None);
    assert!(
        is_error,
        "a server signed by an unknown CA was trusted: {text}"
    );
    assert!(
        text.contains("certificate") || text.contains("UnknownIssuer"),
        "the error does not say it is the certificate: {text}"
    );
    assert!(mock.seen().is_empty(), "the request got through: {text}");

    let (is_error, text) = ask_through(&front, Some(&ca));
    assert!(!is_error, "{text}");
    assert!(text.contains("Rust 1.95 is out."), "{text}");
    let seen = mock.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].api_key.as_deref(), Some(KEY));
}

#[test]
fn an_unusable_ssl_cert_file_is_one_clear_error_for_ask_google() {
    let mock = GeminiMock::start(vec![Reply::answer("never", None)]);
    let front = TlsFront::start(&mock.base);
    let tmp = tempfile::tempdir().unwrap();

    let missing = tmp.path().join("missing.pem");
    let (is_error, text) = ask_through(&front, Some(&missing));
    assert!(is_error, "{text}");
    let expected = format!(
        "could not read the CA certificates in {} (SSL_CERT_FILE)",
        missing.display()
    );
    assert!(text.contains(&expected), "{text}");
    assert_eq!(
        text.matches("SSL_CERT_FILE").count(),
        1,
        "said twice: {text}"
    );

    let empty = tmp.path().join("not-a-bundle.pem");
    fs::write(&empty, "this is not PEM\n").unwrap();
    let (is_error, text) = ask_through(&front, Some(&empty));
    assert!(is_error, "{text}");
    assert!(
        text.contains(&format!(
            "{} (SSL_CERT_FILE) holds no PEM certificate",
            empty.display()
        )),
        "{text}"
    );
    assert!(mock.seen().is_empty(), "{:?}", mock.seen());
}

/// `coogle self-update --dry-run` with the releases API, SHA256SUMS and the archive all behind
/// the HTTPS front: it fails on the certificate without `SSL_CERT_FILE`, verifies the archive
/// with it, and refuses to start with one it cannot read.
#[test]
fn self_update_reaches_github_through_the_same_trust() {
    let env = Env::with_fake(json!({}));
    let exe = env.path("bin/coogle");
    fs::create_dir_all(exe.parent().unwrap()).unwrap();
    support::copy_executable(std::path::Path::new(support::COOGLE), &exe);
    let dir = env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let github = FakeGithub::start(vec![release(
        &dir,
        "9.9.9",
        &env.path("new-binary.log"),
        false,
    )]);
    let front = TlsFront::start(&github.base);
    github.advertise(&front.origin);
    let ca = env.path("corporate-ca.pem");
    fs::write(&ca, &front.ca_pem).unwrap();

    let run = |ca_file: Option<&std::path::Path>| {
        let mut cmd = env.cmd();
        cmd.arg("self-update")
            .env("COOGLE_SELF_UPDATE_EXE", &exe)
            .env("COOGLE_UPDATE_API_URL", &front.origin)
            .env_remove("HOMEBREW_PREFIX")
            .env_remove("SSL_CERT_DIR");
        match ca_file {
            Some(p) => cmd.env("SSL_CERT_FILE", p),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        support::Output::of(cmd, &["--dry-run"])
    };

    let out = run(None);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(
        out.stderr.contains(&format!(
            "error: could not list coogle's releases from {}",
            front.origin
        )),
        "{out}"
    );
    assert!(
        out.stderr.contains("certificate") || out.stderr.contains("UnknownIssuer"),
        "{out}"
    );
    assert!(github.requests().is_empty(), "{:?}", github.requests());

    let out = run(Some(&ca));
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("verified coogle-9.9.9-"), "{out}");
    assert!(out.stdout.contains("dry run: would replace"), "{out}");
    let paths: Vec<String> = github.requests().into_iter().map(|r| r.path).collect();
    assert!(
        paths
            .iter()
            .any(|p| p.starts_with("/assets/v9.9.9/coogle-9.9.9-"))
            && paths.iter().any(|p| p == "/assets/v9.9.9/SHA256SUMS"),
        "the downloads did not go through the front: {paths:?}"
    );

    let out = run(Some(&env.path("missing.pem")));
    assert_eq!(out.status, Some(2), "{out}");
    assert!(
        out.stderr.contains(&format!(
            "error: could not read the CA certificates in {} (SSL_CERT_FILE)",
            env.path("missing.pem").display()
        )),
        "{out}"
    );
    assert!(out.stderr.contains("Caused by:"), "{out}");
    assert!(out.stderr.contains("hint: point SSL_CERT_FILE"), "{out}");
}
