//! The relay's side of a TCP connection, read from the kernel (`/proc/net/tcp`), so a
//! test can tell whether the relay really let go of a client's socket — and of the
//! bytes queued in it — without the client reading anything (reading would drain it).

use std::net::{Ipv4Addr, SocketAddr};

/// One relay-side TCP socket as the kernel lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketState {
    /// The kernel's state number (`01` ESTABLISHED, `04` FIN_WAIT1, `06` TIME_WAIT, …).
    pub state: u8,
    /// Bytes in the send queue the peer has not acknowledged.
    pub tx_queue: u64,
}

impl SocketState {
    /// Still holding the connection open or bytes for the peer: anything but a socket
    /// the relay has closed and emptied (TIME_WAIT and CLOSE hold nothing).
    pub fn is_held(&self) -> bool {
        !matches!(self.state, 0x06 | 0x07) || self.tx_queue > 0
    }
}

/// The relay-side socket of the connection between `relay` (the address the relay
/// listens on) and `peer` (the client's local address), if the kernel still has one.
/// IPv4 only: test relays listen on 127.0.0.1.
pub fn relay_side_socket(relay: SocketAddr, peer: SocketAddr) -> Option<SocketState> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let (local, remote) = (proc_addr(relay)?, proc_addr(peer)?);
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&local.as_str()) || fields.get(2) != Some(&remote.as_str()) {
            return None;
        }
        let state = u8::from_str_radix(fields.get(3)?, 16).ok()?;
        let tx_queue = u64::from_str_radix(fields.get(4)?.split(':').next()?, 16).ok()?;
        Some(SocketState { state, tx_queue })
    })
}

/// `addr` the way `/proc/net/tcp` writes it: the IPv4 address as a little-endian hex
/// word, then the port in hex.
fn proc_addr(addr: SocketAddr) -> Option<String> {
    let SocketAddr::V4(v4) = addr else {
        return None;
    };
    let ip: Ipv4Addr = *v4.ip();
    Some(format!(
        "{:08X}:{:04X}",
        u32::from_le_bytes(ip.octets()),
        v4.port()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_written_as_the_kernel_does() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().expect("address");
        assert_eq!(proc_addr(addr).as_deref(), Some("0100007F:1F90"));
    }

    #[test]
    fn a_listening_socket_of_this_process_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = std::net::TcpStream::connect(addr).expect("connect");
        let (_server, peer) = listener.accept().expect("accept");
        let state = relay_side_socket(addr, peer).expect("listed");
        assert_eq!(state.state, 0x01, "established");
        assert!(state.is_held());
        drop(client);
    }
}
