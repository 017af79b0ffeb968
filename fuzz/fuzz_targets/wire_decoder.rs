//! Fuzz the wire decoder: whatever bytes arrive, splitting them into capped lines and parsing
//! each as a hello, a control request or a JSON-RPC message must not panic, and a message that
//! parses must survive an id rewrite as valid JSON.
#![no_main]

use coogle::wire::{self, Line, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut r = tokio::io::BufReader::with_capacity(7, data);
        let mut buf = Vec::new();
        loop {
            match wire::read_line_capped(&mut r, &mut buf, 4096).await {
                Ok(Line::Complete) => {
                    assert!(buf.len() <= 4096);
                    let _ = wire::parse_first_line(&buf);
                    if let Ok(mut m) = Message::parse(&buf) {
                        m.set_id(wire::raw(&"fuzz"));
                        let line = m.to_line();
                        assert!(serde_json::from_slice::<serde_json::Value>(&line).is_ok());
                        let _ = m.progress_token();
                    }
                    buf.clear();
                }
                Ok(Line::TooLong) | Ok(Line::Eof) | Err(_) => break,
            }
        }
    });
});
