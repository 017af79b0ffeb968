//! Property tests for the wire: any input either decodes into the same lines it was made of, or
//! is refused; a message's untouched fields survive an id rewrite byte for byte.

use coogle::wire::{self, Line, Message};
use proptest::prelude::*;
use serde_json::{Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        "[^\u{0}]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn read_all(data: &[u8], chunk: usize, cap: usize) -> Vec<Result<Vec<u8>, ()>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut r = tokio::io::BufReader::with_capacity(chunk.max(1), data);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            match wire::read_line_capped(&mut r, &mut buf, cap).await.unwrap() {
                Line::Complete => {
                    out.push(Ok(std::mem::take(&mut buf)));
                }
                Line::TooLong => {
                    out.push(Err(()));
                    break;
                }
                Line::Eof => {
                    if !buf.is_empty() {
                        out.push(Ok(std::mem::take(&mut buf)));
                    }
                    break;
                }
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lines_come_back_as_they_were_written(
        lines in prop::collection::vec("[^\n\r]{0,40}", 0..8),
        chunk in 1usize..64,
    ) {
        let mut data = Vec::new();
        for l in &lines {
            data.extend_from_slice(l.as_bytes());
            data.push(b'\n');
        }
        let got = read_all(&data, chunk, 1024);
        let want: Vec<Result<Vec<u8>, ()>> = lines.iter().map(|l| Ok(l.as_bytes().to_vec())).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn an_oversized_line_is_refused_never_truncated(
        short in "[a-z]{0,10}",
        long_len in 41usize..200,
        chunk in 1usize..64,
    ) {
        let mut data = format!("{short}\n").into_bytes();
        data.extend(std::iter::repeat_n(b'x', long_len));
        data.push(b'\n');
        let got = read_all(&data, chunk, 40);
        prop_assert_eq!(got, vec![Ok(short.into_bytes()), Err(())]);
    }

    #[test]
    fn any_bytes_parse_or_are_refused_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = Message::parse(&bytes);
        let _ = wire::parse_first_line(&bytes);
    }

    #[test]
    fn rewriting_the_id_keeps_every_other_field(params in json_value(), extra in json_value(), id in any::<i64>()) {
        let original = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params, "x-extra": extra});
        let text = serde_json::to_vec(&original).unwrap();
        let mut msg = Message::parse(&text).unwrap();
        msg.set_id(wire::raw(&"rewritten"));
        // Byte for byte: only the id changed (numbers keep their exact digits).
        let mut expected = original.clone();
        expected["id"] = json!("rewritten");
        let mut expected_line = serde_json::to_vec(&expected).unwrap();
        expected_line.push(b'\n');
        prop_assert_eq!(msg.to_line(), expected_line);
        // And back again.
        let mut back = Message::parse(&msg.to_line()).unwrap();
        back.set_id(wire::raw(&id));
        let mut original_line = text.clone();
        original_line.push(b'\n');
        prop_assert_eq!(back.to_line(), original_line);
    }
}
