//! A mock of Gemini's `generateContent` endpoint on 127.0.0.1: it answers each request with the
//! next scripted reply (status, body, optional delay; the last one repeats) and records what it
//! was sent (path, the API key header, the JSON body).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    pub fn raw(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: body.to_owned(),
            delay: Duration::ZERO,
        }
    }

    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// A Gemini-style error body.
    pub fn error(status: u16, api_status: &str, message: &str) -> Reply {
        Reply::json(
            status,
            json!({"error": {"code": status, "message": message, "status": api_status}}),
        )
    }

    /// A plain answer with optional grounding metadata.
    pub fn answer(text: &str, grounding: Option<Value>) -> Reply {
        let mut candidate = json!({"content": {"role": "model", "parts": [{"text": text}]},
                                   "finishReason": "STOP"});
        if let Some(g) = grounding {
            candidate["groundingMetadata"] = g;
        }
        Reply::json(200, json!({"candidates": [candidate]}))
    }
}

#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub api_key: Option<String>,
    pub body: Value,
}

pub struct GeminiMock {
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl GeminiMock {
    pub fn start(replies: Vec<Reply>) -> GeminiMock {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/v1beta", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(replies));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (log, replies) = (log.clone(), replies.clone());
                std::thread::spawn(move || serve(stream, &log, &replies));
            }
        });
        GeminiMock { base, seen }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Seen>>, replies: &Mutex<Vec<Reply>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_owned();
        let mut length = 0usize;
        let mut api_key = None;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "x-goog-api-key" => api_key = Some(value.trim().to_owned()),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reply = {
            let mut r = replies.lock().unwrap();
            if r.len() > 1 {
                r.remove(0)
            } else {
                r[0].clone()
            }
        };
        log.lock().unwrap().push(Seen {
            path,
            api_key,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        std::thread::sleep(reply.delay);
        let head = format!(
            "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            reply.status,
            reply.body.len()
        );
        if writer.write_all(head.as_bytes()).is_err()
            || writer.write_all(reply.body.as_bytes()).is_err()
        {
            return;
        }
    }
}
