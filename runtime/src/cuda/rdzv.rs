//! Rendezvous for one process per GPU: how ranks 1..N learn rank 0's `ncclUniqueId`.
//!
//! Two ways, chosen by the environment (the variables torchrun sets, plus one of our own):
//! - `COMMLIR_RDZV_FILE=path`: rank 0 writes the id (hex) to `path.tmp` and renames it to
//!   `path` (atomic), the others poll until a file newer than their own start appears; rank 0
//!   removes the file once the communicator is up (every rank has read it by then, since
//!   `ncclCommInitRank` returns only when all ranks joined).
//! - `MASTER_ADDR` + `MASTER_PORT`: rank 0 listens, sends the 128 bytes to each of the
//!   WORLD_SIZE - 1 connections, and closes; the others connect with retries.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// Bytes of an `ncclUniqueId`.
pub const ID_BYTES: usize = 128;

/// Where the id comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    File(String),
    Tcp { addr: String, port: u16 },
}

impl Rendezvous {
    /// The rendezvous the environment asks for, if any.
    pub fn from_env() -> Result<Option<Rendezvous>, String> {
        if let Ok(f) = std::env::var("COMMLIR_RDZV_FILE") {
            return Ok(Some(Rendezvous::File(f)));
        }
        match (std::env::var("MASTER_ADDR"), std::env::var("MASTER_PORT")) {
            (Ok(addr), Ok(port)) => {
                let port = port
                    .parse()
                    .map_err(|_| format!("MASTER_PORT={port} is not a port number"))?;
                Ok(Some(Rendezvous::Tcp { addr, port }))
            }
            _ => Ok(None),
        }
    }

    /// Rank 0 publishes `id` for `world - 1` peers (TCP: blocks until every peer has it).
    pub fn publish(
        &self,
        id: &[u8; ID_BYTES],
        world: usize,
        timeout: Duration,
    ) -> Result<(), String> {
        match self {
            Rendezvous::File(path) => {
                let tmp = format!("{path}.tmp");
                std::fs::write(&tmp, hex(id))
                    .and_then(|_| std::fs::rename(&tmp, path))
                    .map_err(|e| format!("rendezvous: cannot write {path}: {e}"))
            }
            Rendezvous::Tcp { addr, port } => {
                let l = std::net::TcpListener::bind((addr.as_str(), *port))
                    .map_err(|e| format!("rendezvous: cannot listen on {addr}:{port}: {e}"))?;
                l.set_nonblocking(true).map_err(|e| e.to_string())?;
                let start = Instant::now();
                let mut served = 1;
                while served < world {
                    match l.accept() {
                        Ok((mut s, _)) => {
                            s.set_nonblocking(false).map_err(|e| e.to_string())?;
                            s.write_all(id)
                                .map_err(|e| format!("rendezvous: send failed: {e}"))?;
                            served += 1;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            if start.elapsed() > timeout {
                                return Err(format!(
                                    "rendezvous: only {served} of {world} ranks connected to {addr}:{port} within {} s",
                                    timeout.as_secs()
                                ));
                            }
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(e) => return Err(format!("rendezvous: accept failed: {e}")),
                    }
                }
                Ok(())
            }
        }
    }

    /// A rank other than 0 fetches the id.
    pub fn fetch(&self, started: SystemTime, timeout: Duration) -> Result<[u8; ID_BYTES], String> {
        let start = Instant::now();
        loop {
            let got = match self {
                Rendezvous::File(path) => read_fresh(Path::new(path), started),
                Rendezvous::Tcp { addr, port } => {
                    std::net::TcpStream::connect((addr.as_str(), *port))
                        .ok()
                        .and_then(|mut s| {
                            let mut id = [0u8; ID_BYTES];
                            s.read_exact(&mut id).ok().map(|_| id)
                        })
                }
            };
            if let Some(id) = got {
                return Ok(id);
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "rendezvous: no id from rank 0 ({self:?}) within {} s",
                    timeout.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Rank 0's cleanup once every rank is connected.
    pub fn finish(&self) {
        if let Rendezvous::File(path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The id in a rendezvous file, if the file exists, was written after `started` (minus a
/// little clock slack: a leftover from an earlier job is ignored) and holds 128 hex bytes.
fn read_fresh(path: &Path, started: SystemTime) -> Option<[u8; ID_BYTES]> {
    let meta = std::fs::metadata(path).ok()?;
    let slack = Duration::from_secs(30);
    if meta.modified().ok()? + slack < started {
        return None;
    }
    unhex(std::fs::read_to_string(path).ok()?.trim())
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The inverse of [`hex`] for exactly [`ID_BYTES`] bytes.
pub fn unhex(s: &str) -> Option<[u8; ID_BYTES]> {
    if s.len() != 2 * ID_BYTES || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; ID_BYTES];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_rendezvous_round_trip() {
        let dir = std::env::temp_dir().join(format!("commlir-rdzv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("id").to_string_lossy().into_owned();
        let r = Rendezvous::File(path.clone());
        let mut id = [0u8; ID_BYTES];
        for (i, b) in id.iter_mut().enumerate() {
            *b = i as u8 ^ 0x5a;
        }
        let started = SystemTime::now();
        r.publish(&id, 2, Duration::from_secs(1)).unwrap();
        assert_eq!(r.fetch(started, Duration::from_secs(1)).unwrap(), id);
        r.finish();
        assert!(r.fetch(started, Duration::from_millis(50)).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn tcp_rendezvous_round_trip() {
        // An ephemeral port: bind, read it back, release it for the rendezvous.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = Rendezvous::Tcp {
            addr: "127.0.0.1".into(),
            port,
        };
        let id = [7u8; ID_BYTES];
        let r2 = r.clone();
        let peer = std::thread::spawn(move || r2.fetch(SystemTime::now(), Duration::from_secs(10)));
        r.publish(&id, 2, Duration::from_secs(10)).unwrap();
        assert_eq!(peer.join().unwrap().unwrap(), id);
    }

    #[test]
    fn hex_round_trip_and_rejects() {
        let id = [0xabu8; ID_BYTES];
        assert_eq!(unhex(&hex(&id)), Some(id));
        assert_eq!(unhex("zz"), None);
    }
}
