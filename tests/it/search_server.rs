//! `coogle search-server` as a real child process on stdio, against a mock Gemini on 127.0.0.1:
//! the grounded answer's format (duplicate, empty and too many sources; capped queries), no
//! grounding, each error category (401, 403, 429, 500 then success, a slow answer, malformed
//! JSON, an unreachable API) with its retry policy and backoff, the date in the system
//! instruction, output_file (absolute, unwritable, never over a file or through a link unless
//! told, relative refused), the key redacted from errors, the models, where the API key comes
//! from, and every validation message.

use crate::support;

use std::fs;
use std::time::Duration;

use serde_json::{Value, json};
use support::gemini_mock::{GeminiMock, Reply};
use support::{Env, Shim, fake_mcp};

const KEY: &str = "AIzaSyD-search-server-test-0123456789ab";

struct Server {
    env: Env,
    shim: Shim,
}

fn start(mock: &GeminiMock, search_extra: Value) -> Server {
    start_with(mock, search_extra, |_, _| {})
}

/// `start`, with a hook to set up the environment, the working directory's files or HOME's
/// before the server starts.
fn start_with(
    mock: &GeminiMock,
    search_extra: Value,
    prepare: impl FnOnce(&Env, &mut std::process::Command),
) -> Server {
    let env = Env::new();
    let mut search = json!({"apiKey": KEY, "apiBaseUrl": mock.base, "retryBaseMs": 10,
                            "timeoutMs": 3000});
    if let Value::Object(extra) = search_extra {
        for (k, v) in extra {
            search[k] = v;
        }
    }
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp()}}, "search": search}));
    let work = env.path("work");
    fs::create_dir_all(&work).unwrap();
    let mut cmd = env.cmd();
    cmd.current_dir(&work);
    prepare(&env, &mut cmd);
    let mut shim = env.stdio_server(cmd, &["search-server"]);
    shim.initialize();
    Server { env, shim }
}

fn ask(s: &mut Server, args: Value) -> (bool, String) {
    let r = s.shim.call("ask_google", args);
    assert!(r.get("error").is_none(), "a protocol error: {r}");
    (
        r["result"]["isError"].as_bool().unwrap_or(false),
        support::text(&r),
    )
}

/// The server's log, once it has exited.
fn log(mut s: Server) -> String {
    s.shim.close_stdin();
    s.shim.stderr()
}

fn today_utc() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn tools_list_offers_ask_google_with_its_schema() {
    let mock = GeminiMock::start(vec![Reply::answer("x", None)]);
    let mut s = start(&mock, json!({}));
    let tools = s.shim.request("tools/list", json!({}));
    let tool = &tools["result"]["tools"][0];
    assert_eq!(tool["name"], "ask_google");
    assert_eq!(
        tool["inputSchema"]["properties"]["model"]["enum"],
        json!(["pro", "flash", "flash-lite"])
    );
    assert_eq!(tool["inputSchema"]["required"], json!(["question"]));
    let description = tool["description"].as_str().unwrap();
    assert!(description.contains("versions") && description.contains("news"));
}

#[test]
fn a_grounded_answer_with_messy_sources() {
    let mut chunks = vec![
        json!({"web": {"uri": "https://doc.rust-lang.org/releases", "title": "Rust releases"}}),
        json!({"web": {"uri": "https://doc.rust-lang.org/releases", "title": "duplicate"}}),
        json!({"web": {"uri": "", "title": "no url"}}),
    ];
    for i in 0..15 {
        chunks.push(json!({"web": {"uri": format!("https://s{i}.example/"), "title": format!("Source {i}")}}));
    }
    let queries: Vec<String> = (0..11).map(|i| format!("query {i}")).collect();
    let mock = GeminiMock::start(vec![Reply::answer(
        "Rust 1.95.0 is the current stable release.",
        Some(json!({"groundingChunks": chunks, "webSearchQueries": queries})),
    )]);
    let mut s = start(&mock, json!({}));
    let (is_error, text) = ask(&mut s, json!({"question": "What is the latest Rust?"}));
    assert!(!is_error, "{text}");
    let mut expected = String::from(
        "Rust 1.95.0 is the current stable release.\n\n---\n\n**Sources:**\n1. [Rust releases](https://doc.rust-lang.org/releases)\n",
    );
    for i in 0..11 {
        expected.push_str(&format!("{}. [Source {i}](https://s{i}.example/)\n", i + 2));
    }
    expected.push_str("\n**Search queries performed:**\n");
    for i in 0..8 {
        expected.push_str(&format!("{}. query {i}\n", i + 1));
    }
    assert_eq!(text, expected.trim_end());

    // The request: the pro model, the key in the header, search grounding, the date injected.
    let seen = mock.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].path,
        "/v1beta/models/gemini-3.1-pro-preview:generateContent"
    );
    assert_eq!(seen[0].api_key.as_deref(), Some(KEY));
    assert_eq!(seen[0].body["tools"], json!([{"google_search": {}}]));
    assert_eq!(
        seen[0].body["contents"][0]["parts"][0]["text"],
        "What is the latest Rust?"
    );
    let system = seen[0].body["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        system.contains(&format!("Today is {} (UTC)", today_utc())),
        "{system}"
    );
    assert!(!system.contains("{{CURRENT_DATE}}"));
    assert!(!log(s).contains(KEY), "the key reached the log");
}

#[test]
fn no_grounding_metadata_is_just_the_answer_and_models_map_to_config() {
    let mock = GeminiMock::start(vec![Reply::answer("Plain answer.", None)]);
    let mut s = start(&mock, json!({"models": {"flash": "my-flash-model"}}));
    let (is_error, text) = ask(&mut s, json!({"question": "q", "model": "flash"}));
    assert!(!is_error);
    assert_eq!(text, "Plain answer.");
    let (_, _) = ask(&mut s, json!({"question": "q", "model": "flash-lite"}));
    let paths: Vec<String> = mock.seen().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/v1beta/models/my-flash-model:generateContent",
            "/v1beta/models/gemini-3.1-flash-lite-preview:generateContent"
        ]
    );
}

#[test]
fn auth_and_quota_errors_are_not_retried() {
    for (reply, prefix) in [
        (
            Reply::error(401, "UNAUTHENTICATED", "bad key"),
            "[AUTH_ERROR]",
        ),
        (
            Reply::error(403, "PERMISSION_DENIED", "no access"),
            "[AUTH_ERROR]",
        ),
        (
            Reply::error(
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
            ),
            "[AUTH_ERROR]",
        ),
        (
            Reply::error(429, "RESOURCE_EXHAUSTED", "quota exceeded"),
            "[QUOTA_ERROR]",
        ),
    ] {
        let mock = GeminiMock::start(vec![reply.clone()]);
        let mut s = start(&mock, json!({}));
        let (is_error, text) = ask(&mut s, json!({"question": "q"}));
        assert!(is_error, "{text}");
        assert!(text.starts_with(prefix), "{reply:?}: {text}");
        assert_eq!(mock.seen().len(), 1, "{prefix} was retried");
    }
}

#[test]
fn a_server_error_is_retried_then_succeeds() {
    let mock = GeminiMock::start(vec![
        Reply::error(500, "INTERNAL", "oops"),
        Reply::error(503, "UNAVAILABLE", "overloaded"),
        Reply::answer("Third time lucky.", None),
    ]);
    let mut s = start(&mock, json!({}));
    let (is_error, text) = ask(&mut s, json!({"question": "q"}));
    assert!(!is_error, "{text}");
    assert_eq!(text, "Third time lucky.");
    assert_eq!(mock.seen().len(), 3);
    let log = log(s);
    assert!(
        log.contains("attempt 1/4") && log.contains("attempt 3/4"),
        "{log}"
    );
}

#[test]
fn persistent_server_errors_give_up_after_four_attempts() {
    let mock = GeminiMock::start(vec![Reply::error(500, "INTERNAL", "still broken")]);
    let mut s = start(&mock, json!({}));
    let (is_error, text) = ask(&mut s, json!({"question": "q"}));
    assert!(is_error);
    assert!(
        text.starts_with("[API_ERROR]") && text.contains("still broken"),
        "{text}"
    );
    assert_eq!(mock.seen().len(), 4);
    assert!(log(s).contains("attempt 4/4"));
}

#[test]
fn a_slow_answer_times_out_and_is_retried() {
    let mock = GeminiMock::start(vec![
        Reply::answer("late", None).after(Duration::from_secs(3)),
    ]);
    let mut s = start(&mock, json!({"timeoutMs": 300, "maxRetries": 1}));
    let (is_error, text) = ask(&mut s, json!({"question": "q"}));
    assert!(is_error);
    assert!(text.starts_with("[TIMEOUT_ERROR]"), "{text}");
    assert!(text.contains("300 ms"), "{text}");
    assert_eq!(mock.seen().len(), 2, "a timeout is transient: retried once");
}

#[test]
fn malformed_json_is_an_api_error() {
    let mock = GeminiMock::start(vec![Reply::raw(200, "{\"candidates\": [")]);
    let mut s = start(&mock, json!({}));
    let (is_error, text) = ask(&mut s, json!({"question": "q"}));
    assert!(is_error);
    assert!(
        text.starts_with("[API_ERROR] Gemini answered with malformed JSON"),
        "{text}"
    );
    assert_eq!(mock.seen().len(), 1);
}

#[test]
fn output_file_absolute_and_unwritable() {
    let mock = GeminiMock::start(vec![Reply::answer("Saved answer.", None)]);
    let mut s = start(&mock, json!({}));
    // Absolute, parents created.
    let abs = s.env.path("elsewhere/deep/a.md");
    let (is_error, text) = ask(
        &mut s,
        json!({"question": "q", "output_file": abs.display().to_string()}),
    );
    assert!(!is_error, "{text}");
    assert_eq!(fs::read_to_string(&abs).unwrap(), "Saved answer.\n");
    assert_eq!(
        text,
        format!("Saved answer.\n\n[saved to {}]", abs.display())
    );
    // Unwritable (its parent is a file): the answer is kept, the error appended.
    let blocker = s.env.path("work/file");
    fs::write(&blocker, "x").unwrap();
    let (is_error, text) = ask(
        &mut s,
        json!({"question": "q", "output_file": blocker.join("answer.md").display().to_string()}),
    );
    assert!(
        !is_error,
        "the answer is good; only the write failed: {text}"
    );
    assert!(
        text.starts_with("Saved answer.\n\n[output_file error] could not create "),
        "{text}"
    );
}

/// Regression (issue 18): `output_file` overwrote an existing file, through a symbolic link
/// too, and a relative path landed in the server's working directory (shared by every
/// session: the daemon's, not the caller's project). Now a relative path is refused before
/// Gemini is asked; an existing file is kept unless `overwrite: true`; a link is never written
/// through.
#[test]
fn output_file_never_overwrites_unless_told_nor_follows_a_link() {
    let mock = GeminiMock::start(vec![Reply::answer("Answer.", None)]);
    let mut s = start(&mock, json!({}));
    // Relative: refused, nothing asked, nothing written in the server's directory.
    let (is_error, text) = ask(
        &mut s,
        json!({"question": "q", "output_file": "notes/answer.md"}),
    );
    assert!(is_error, "{text}");
    assert!(
        text.starts_with("Invalid input: output_file must be an absolute path"),
        "{text}"
    );
    assert!(mock.seen().is_empty());
    assert!(!s.env.path("work/notes").exists());

    let precious = s.env.path("precious.txt");
    fs::write(&precious, "keep me").unwrap();
    // An existing file is kept.
    let (is_error, text) = ask(
        &mut s,
        json!({"question": "q", "output_file": precious.display().to_string()}),
    );
    assert!(!is_error, "{text}");
    assert!(
        text.contains("already exists") && text.contains("overwrite"),
        "{text}"
    );
    assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me");
    // A link planted where the answer goes is not written through, told to overwrite or not.
    let link = s.env.path("work/answer.md");
    std::os::unix::fs::symlink(&precious, &link).unwrap();
    for overwrite in [false, true] {
        let (is_error, text) = ask(
            &mut s,
            json!({"question": "q", "output_file": link.display().to_string(), "overwrite": overwrite}),
        );
        assert!(!is_error, "{text}");
        assert!(text.contains("symbolic link"), "{overwrite}: {text}");
        assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me");
    }
    // Told to, it replaces a regular file.
    let (is_error, text) = ask(
        &mut s,
        json!({"question": "q", "output_file": precious.display().to_string(), "overwrite": true}),
    );
    assert!(!is_error, "{text}");
    assert_eq!(fs::read_to_string(&precious).unwrap(), "Answer.\n");
}

/// Regression (issue 18): an error text from the API that quoted the key was shown to the
/// agent and logged verbatim. It is redacted everywhere, whole or cut short.
#[test]
fn an_api_error_that_quotes_the_key_is_redacted() {
    let json_error = Reply::error(
        400,
        "INVALID_ARGUMENT",
        &format!("API key not valid: {KEY}. Please pass a valid API key."),
    );
    // A non-JSON body cut at 200 characters with the key across the cut, and a malformed 200.
    let plain = Reply::raw(502, &format!("{}{KEY} upstream said", "e".repeat(180)));
    let malformed = Reply::raw(200, &format!("{{\"candidates\": [{KEY}"));
    for reply in [json_error, plain, malformed] {
        let mock = GeminiMock::start(vec![reply.clone()]);
        let mut s = start(&mock, json!({"maxRetries": 0}));
        let (is_error, text) = ask(&mut s, json!({"question": "q"}));
        assert!(is_error, "{text}");
        assert!(
            !text.contains(&KEY[..12]),
            "{reply:?}: the key was shown: {text}"
        );
        assert!(text.contains("[redacted]"), "{text}");
        let log = log(s);
        assert!(!log.contains(&KEY[..12]), "the key was logged: {log}");
    }
}

#[test]
fn every_validation_message() {
    let mock = GeminiMock::start(vec![Reply::answer("x", None)]);
    let mut s = start(&mock, json!({}));
    let long = "x".repeat(10_001);
    for (args, message) in [
        (json!({}), "Invalid input: question is required"),
        (
            json!({"question": 42}),
            "Invalid input: question must be a string, not a number",
        ),
        (
            json!({"question": "  \n "}),
            "Invalid input: question is empty or only whitespace",
        ),
        (
            json!({"question": long}),
            "Invalid input: question is 10001 characters long; the limit is 10000",
        ),
        (
            json!({"question": "q", "model": "ultra"}),
            "Invalid input: unknown model \"ultra\": use pro (the default), flash or flash-lite",
        ),
    ] {
        let (is_error, text) = ask(&mut s, args.clone());
        assert!(is_error, "{args}: {text}");
        assert!(text.starts_with(message), "{args}: {text}");
    }
    assert!(mock.seen().is_empty(), "an invalid call reached Gemini");
    // An unknown tool is a protocol error.
    let r = s.shim.call("ask_bing", json!({"question": "q"}));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool"),
        "{r}"
    );
}

#[test]
fn without_a_key_calls_fail_with_auth_error() {
    let mock = GeminiMock::start(vec![Reply::answer("x", None)]);
    let mut s = start(&mock, json!({"apiKey": null}));
    let (is_error, text) = ask(&mut s, json!({"question": "q"}));
    assert!(is_error);
    assert!(text.starts_with("[AUTH_ERROR] no Gemini API key"), "{text}");
    assert!(mock.seen().is_empty());
}

#[test]
fn backoff_doubles_from_retry_base() {
    let mock = GeminiMock::start(vec![
        Reply::error(500, "INTERNAL", "one"),
        Reply::error(502, "UNAVAILABLE", "two"),
        Reply::error(503, "UNAVAILABLE", "three"),
        Reply::answer("Fourth attempt.", None),
    ]);
    let mut s = start(&mock, json!({"retryBaseMs": 100}));
    let began = std::time::Instant::now();
    let (is_error, text) = ask(&mut s, json!({"question": "q"}));
    let took = began.elapsed();
    assert!(!is_error, "{text}");
    assert_eq!(mock.seen().len(), 4);
    assert!(
        took >= Duration::from_millis(100 + 200 + 400),
        "three retries slept only {took:?}"
    );
    let log = log(s);
    for wait in [
        "retrying in 100 ms",
        "retrying in 200 ms",
        "retrying in 400 ms",
    ] {
        assert!(log.contains(wait), "{wait}: {log}");
    }
}

#[test]
fn an_unreachable_api_is_retried_then_an_api_error() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1beta", closed.local_addr().unwrap());
    drop(closed);
    let mock = GeminiMock::start(vec![Reply::answer("unused", None)]);
    let mut s = start(&mock, json!({"apiBaseUrl": base}));
    let (is_error, text) = ask(&mut s, json!({"question": "q"}));
    assert!(is_error);
    assert!(
        text.starts_with(&format!("[API_ERROR] could not reach {base}")),
        "{text}"
    );
    assert!(
        log(s).contains("attempt 4/4"),
        "a connection error is transient"
    );
}

/// Where the key comes from: the environment (either variable, before the config), or a `.env`
/// file in the working directory, then in HOME. A placeholder is warned about, never shown.
#[test]
fn the_key_comes_from_the_environment_or_a_dotenv_file() {
    let key_seen = |extra: Value, prepare: &dyn Fn(&Env, &mut std::process::Command)| {
        let mock = GeminiMock::start(vec![Reply::answer("ok", None)]);
        let mut s = start_with(&mock, extra, |env, cmd| prepare(env, cmd));
        let (is_error, text) = ask(&mut s, json!({"question": "q"}));
        assert!(!is_error, "{text}");
        (mock.seen()[0].api_key.clone().unwrap(), log(s))
    };
    let (key, log) = key_seen(json!({}), &|_, cmd| {
        cmd.env("GOOGLE_API_KEY", "AIzaSyD-from-google-env-0123456789abcd");
    });
    assert_eq!(
        key, "AIzaSyD-from-google-env-0123456789abcd",
        "env beats config"
    );
    assert!(log.contains("key from $GOOGLE_API_KEY"), "{log}");

    let (key, _) = key_seen(json!({"apiKey": null}), &|_, cmd| {
        cmd.env("GEMINI_API_KEY", "AIzaSyD-from-gemini-env-0123456789abcd");
    });
    assert_eq!(key, "AIzaSyD-from-gemini-env-0123456789abcd");

    let (key, log) = key_seen(json!({"apiKey": null}), &|env, _| {
        fs::write(
            env.home.join(".env"),
            "GEMINI_API_KEY=AIzaSyD-home-dotenv-0123456789abcdef\n",
        )
        .unwrap();
        fs::write(
            env.path("work/.env"),
            "# the project's\nexport GOOGLE_API_KEY=\"AIzaSyD-cwd-dotenv-0123456789abcdefg\"\n",
        )
        .unwrap();
    });
    assert_eq!(
        key, "AIzaSyD-cwd-dotenv-0123456789abcdefg",
        ".env in cwd first"
    );
    assert!(log.contains("work/.env"), "{log}");

    let (key, _) = key_seen(json!({"apiKey": null}), &|env, _| {
        fs::write(
            env.home.join(".env"),
            "GEMINI_API_KEY=AIzaSyD-home-dotenv-0123456789abcdef\n",
        )
        .unwrap();
    });
    assert_eq!(
        key, "AIzaSyD-home-dotenv-0123456789abcdef",
        "then .env in HOME"
    );

    let (key, log) = key_seen(json!({"apiKey": "your-api-key-here"}), &|_, _| {});
    assert_eq!(key, "your-api-key-here");
    assert!(log.contains("looks like a placeholder"), "{log}");
    assert!(
        !log.contains("your-api-key-here"),
        "the key reached the log: {log}"
    );
}

/// A cancelled call stops at once: no more attempts reach Gemini, and the server answers the
/// next call.
#[test]
fn a_cancelled_call_makes_no_more_attempts() {
    let mock = GeminiMock::start(vec![
        Reply::error(500, "INTERNAL", "first"),
        Reply::answer("After the cancel.", None),
    ]);
    let mut s = start(&mock, json!({"retryBaseMs": 1000}));
    s.shim
        .send(&json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
                        "params": {"name": "ask_google", "arguments": {"question": "q"}}}));
    support::wait_until("the first attempt", Duration::from_secs(5), || {
        match mock.seen().len() {
            1 => Ok(()),
            n => Err(format!("the mock saw {n} requests")),
        }
    });
    s.shim.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 41, "reason": "test"}}),
    );
    // Past the 1 s backoff, the second attempt would have been made by now.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(mock.seen().len(), 1, "a cancelled call was retried");
    let (is_error, text) = ask(&mut s, json!({"question": "q"}));
    assert!(!is_error, "{text}");
    assert!(log(s).contains("ask_google cancelled by the client"));
}
