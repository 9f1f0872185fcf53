// Command demo-ecmp is `make demo-ecmp`: two vipd boxes behind BIRD as the
// upstream router, each announcing the VIPs over BGP. It shows the
// router's ECMP route to a VIP, the traffic split over both boxes, then
// kills one box silently (its link cut, vipd SIGKILLed) while 100 TCP
// connections stream through the DSR VIP, and counts the connections that
// broke once the router dropped the dead box by its hold timer. It needs
// root and bird2 (make demo-ecmp installs it), removes everything it created,
// and takes about 30 seconds.
package main
